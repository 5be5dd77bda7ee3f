import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.ProtectionDomain;

/**
 * A Java agent standing in for the ones that change classes (coverage, APM): its transformer
 * hands the JVM other bytes for `LiveAgentTarget`, the class file named by the agent's argument
 * `MODE:PATH` (tests/live_jvm.rs, java_agent_transforming_classes). MODE `load`: a transformer
 * that cannot retransform replaces the class as it loads; `load-retransforming`: one that can
 * retransform does; `retransform`: premain loads the class as compiled, then retransforms it,
 * and the transformer replaces it then, as agents do with the classes loaded before them. The
 * same when attached to the running JVM (`agentmain`). MODE `keep` (no PATH) transforms nothing
 * and only keeps the Instrumentation for the program (tests/live_scripts/LiveRedefined.java).
 */
public final class LiveTransformer {
    /** The JVM's Instrumentation, for programs that retransform their own classes. */
    public static volatile Instrumentation instrumentation;

    private LiveTransformer() {}

    public static void agentmain(String arg, Instrumentation inst) throws Exception {
        premain(arg, inst);
    }

    public static void premain(String arg, Instrumentation inst) throws Exception {
        instrumentation = inst;
        if (arg.equals("keep")) {
            return;
        }
        int colon = arg.indexOf(':');
        String mode = arg.substring(0, colon);
        byte[] replacement = Files.readAllBytes(Paths.get(arg.substring(colon + 1)));
        boolean later = mode.equals("retransform");
        inst.addTransformer(new ClassFileTransformer() {
            @Override
            public byte[] transform(ClassLoader loader, String name, Class<?> redefined, ProtectionDomain pd, byte[] bytes) {
                boolean now = later == (redefined != null);
                return now && loader != null && "LiveAgentTarget".equals(name) ? replacement.clone() : null;
            }
        }, !mode.equals("load"));
        if (later) {
            Class<?> target = Class.forName("LiveAgentTarget", false, ClassLoader.getSystemClassLoader());
            inst.retransformClasses(target);
        }
    }
}
