// A named module that requires nothing but java.base: started with `java -m`, its boot layer has
// no jdk.unsupported (tests/live_jvm.rs, modular_program_without_jdk_unsupported).
module example.modular {
}
