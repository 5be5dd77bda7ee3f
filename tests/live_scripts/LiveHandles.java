import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.IntSupplier;
import java.util.function.LongConsumer;

import lucce.Lucce;

/**
 * Calls through VarHandles and MethodHandles in a loop (-Dhandles.n iterations). The JVM links
 * VarHandle calls straight to methods with other names (VarHandleGuards.guard_LI_L, then the
 * target of linkToStatic): the test checks that the loop enters them without a stack walk once
 * known, and that the marks decode exactly. The loop also runs invokedynamic instructions (a
 * lambda, a capturing lambda), which the JVM links to Invokers$Holder.linkToTargetMethod, and
 * code that runs through hidden classes calling several instrumented methods in a row: a
 * MethodHandle.invokeExact (its invoker), a string concatenation (its lambda form) and a method
 * reference that boxes its argument (the lambda proxy calls Long.valueOf, then the target, as
 * lucene's ScorerUtil does). Hidden classes are instrumented too, so none of this walks per
 * execution; before they were, each such call after the first walked.
 */
public class LiveHandles {
    volatile int field;

    static int twice(int x) {
        return 2 * x;
    }

    static void last(int sum) {
        Lucce.mark(T.here("handles-" + sum));
    }

    long boxed;

    /** Reached through a proxy that boxes: LongConsumer.accept(long) → Long.valueOf → here. */
    void take(Long x) {
        boxed += x;
        if (x == 0L) {
            Lucce.mark(T.here("boxed-" + x));
        }
    }

    public static void main(String[] args) throws Throwable {
        int n = Integer.getInteger("handles.n", 1);
        AtomicReferenceArray<String> array = new AtomicReferenceArray<>(4);
        array.set(1, "x");
        VarHandle vh = MethodHandles.lookup().findVarHandle(LiveHandles.class, "field", int.class);
        MethodHandle mh = MethodHandles.lookup().findStatic(LiveHandles.class, "twice", MethodType.methodType(int.class, int.class));
        LiveHandles h = new LiveHandles();
        LongConsumer box = h::take;
        int sum = 0;
        String text = "";
        for (int i = 0; i < n; i++) {
            box.accept(i);
            sum += (int) mh.invokeExact(i & 1) - 2 * (i & 1);
            text = "i=" + i;
            sum += array.get(i & 1) == null ? 0 : 1;
            vh.compareAndSet(h, i, i + 1);
            IntSupplier one = () -> 1;
            int j = i;
            IntSupplier same = () -> j;
            sum += one.getAsInt() + same.getAsInt() - j - 1;
        }
        last(sum + h.field + (int) mh.invokeExact(3) + text.length() - text.length());
    }
}
