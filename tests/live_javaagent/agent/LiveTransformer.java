import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.ProtectionDomain;

/**
 * A Java agent standing in for the ones that change classes as they load (coverage, APM): its
 * transformer hands the JVM other bytes for `LiveAgentTarget`, the class file named by the
 * agent's argument (tests/live_jvm.rs, java_agent_transforming_classes).
 */
public final class LiveTransformer {
    private LiveTransformer() {}

    public static void premain(String variant, Instrumentation inst) throws Exception {
        byte[] replacement = Files.readAllBytes(Paths.get(variant));
        inst.addTransformer(new ClassFileTransformer() {
            @Override
            public byte[] transform(ClassLoader loader, String name, Class<?> redefined, ProtectionDomain pd, byte[] bytes) {
                return loader != null && "LiveAgentTarget".equals(name) ? replacement.clone() : null;
            }
        });
    }
}
