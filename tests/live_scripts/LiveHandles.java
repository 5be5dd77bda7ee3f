import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.IntSupplier;

import lucce.Lucce;

/**
 * Calls through VarHandles in a loop (-Dhandles.n iterations), then through a MethodHandle. The
 * JVM links VarHandle calls straight to methods with other names (VarHandleGuards.guard_LI_L,
 * then the target of linkToStatic): the test checks that the loop enters them without a stack
 * walk once known, and that the mark decodes exactly. (A MethodHandle.invokeExact still walks
 * on every call: its invoker calls three instrumented methods, and only the first finds the
 * call-site record.) The loop also runs invokedynamic instructions (a lambda, a capturing
 * lambda), which the JVM links to Invokers$Holder.linkToTargetMethod: entered from the
 * instruction's record, not by a walk per execution. (A string concatenation still walks three
 * times: its lambda form, a hidden class, calls three instrumented methods in a row.)
 */
public class LiveHandles {
    volatile int field;

    static int twice(int x) {
        return 2 * x;
    }

    static void last(int sum) {
        Lucce.mark(T.here("handles-" + sum));
    }

    public static void main(String[] args) throws Throwable {
        int n = Integer.getInteger("handles.n", 1);
        AtomicReferenceArray<String> array = new AtomicReferenceArray<>(4);
        array.set(1, "x");
        VarHandle vh = MethodHandles.lookup().findVarHandle(LiveHandles.class, "field", int.class);
        MethodHandle mh = MethodHandles.lookup().findStatic(LiveHandles.class, "twice", MethodType.methodType(int.class, int.class));
        LiveHandles h = new LiveHandles();
        int sum = 0;
        for (int i = 0; i < n; i++) {
            sum += array.get(i & 1) == null ? 0 : 1;
            vh.compareAndSet(h, i, i + 1);
            IntSupplier one = () -> 1;
            int j = i;
            IntSupplier same = () -> j;
            sum += one.getAsInt() + same.getAsInt() - j - 1;
        }
        last(sum + h.field + (int) mh.invokeExact(3));
    }
}
