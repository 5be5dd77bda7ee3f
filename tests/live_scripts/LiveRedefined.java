import com.sun.tools.attach.VirtualMachine;
import java.lang.instrument.Instrumentation;
import lucce.Lucce;

/**
 * Methods still running while their class is retransformed (tests/live_jvm.rs,
 * frames_of_a_replaced_version). The Java agent (LiveTransformer, mode `keep`) changes no bytes,
 * but lucce's load hook rewrites the class again, with new method ids: from then on the frames
 * of `main`, `loop` and `recurse` run the version that was replaced (obsolete methods, as after
 * a debugger's HotSwap), and every mark below them must still decode in full. With the argument
 * `high`, every class of java.desktop is loaded first (as in LiveLoaderHighIds), so that this
 * class's method ids are past 32767 and its probes push them with ldc from the constant pool.
 * With `attach=JAR`, the program attaches the Java agent to its own JVM instead of getting it
 * with `-javaagent` (needs `-Djdk.attach.allowAttachSelf=true`): lucce's load hook could not
 * retransform when the class loaded, so the JVM hands the retransformation lucce's rewrite,
 * probes and all.
 */
public class LiveRedefined {
    static final int HALF = 3;

    static int work(int i) {
        Lucce.mark(T.here(i < HALF ? "work-before" : "work-after"));
        return i;
    }

    static int loop(Instrumentation inst) throws Exception {
        int sum = 0;
        for (int i = 0; i < 2 * HALF; i++) {
            if (i == HALF) {
                inst.retransformClasses(LiveRedefined.class);
                Lucce.mark(T.here("loop-retransformed"));
            }
            sum += work(i);
        }
        Lucce.mark(T.here("loop-end"));
        return sum;
    }

    /** Frames of a recursive method, the deepest of which retransforms the class. */
    static int recurse(Instrumentation inst, int n) throws Exception {
        if (n == 0) {
            return loop(inst);
        }
        int r = recurse(inst, n - 1) + n;
        Lucce.mark(T.here("recurse-return"));
        return r;
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("high")) {
            LiveLoaderHighIds.loadDesktop();
        }
        if (args.length > 0 && args[0].startsWith("attach=")) {
            VirtualMachine vm = VirtualMachine.attach(Long.toString(ProcessHandle.current().pid()));
            try {
                vm.loadAgent(args[0].substring("attach=".length()), "keep");
            } finally {
                vm.detach();
            }
        }
        Instrumentation inst = (Instrumentation) Class.forName("LiveTransformer").getField("instrumentation").get(null);
        int r = recurse(inst, 4);
        Lucce.mark(T.here("main-end"));
        System.out.println("result " + r);
    }
}
