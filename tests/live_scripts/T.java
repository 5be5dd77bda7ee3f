/**
 * The independent witness of every live test: prints, as one line on stdout, a label and the
 * frames `new Throwable().getStackTrace()` shows at the caller of {@code here} (its own top frame
 * dropped, so the first frame printed is the line of the `Lucce.mark(T.here(...))` call), and
 * returns the label made unique: {@code label#N}, N counting the calls of this JVM (so a label a
 * program prints twice still names one event). Native frames are printed too (line -2); the
 * test drops them.
 *
 * Line format: `#here<TAB>label` then, per frame, `<TAB>class<TAB>method<TAB>file<TAB>line`
 * (an empty file when the JVM has none).
 */
public final class T {
    private T() {}

    private static final java.util.concurrent.atomic.AtomicInteger COUNT = new java.util.concurrent.atomic.AtomicInteger();

    public static String here(String label) {
        StackTraceElement[] st = new Throwable().getStackTrace();
        if (st.length == 0 || !st[0].getClassName().equals("T") || !st[0].getMethodName().equals("here")) {
            throw new AssertionError("unexpected top frame " + (st.length == 0 ? "none" : st[0].toString()));
        }
        label = label + "#" + COUNT.incrementAndGet();
        StringBuilder sb = new StringBuilder(64 + st.length * 64);
        sb.append("#here\t").append(label);
        for (int i = 1; i < st.length; i++) {
            StackTraceElement e = st[i];
            String f = e.getFileName();
            sb.append('\t').append(e.getClassName()).append('\t').append(e.getMethodName())
              .append('\t').append(f == null ? "" : f).append('\t').append(e.getLineNumber());
        }
        System.out.println(sb);
        return label;
    }
}
