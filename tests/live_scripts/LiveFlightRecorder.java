import java.io.FileInputStream;
import java.io.IOException;

/**
 * Marks reached through classes the JDK Flight Recorder retransforms once it starts (run with
 * `-XX:StartFlightRecording`): `Throwable` (its constructors, which call `fillInStackTrace`, and
 * `toString`, which calls `getMessage`; both overridden here, so the marks are in their callees)
 * and `Error`; `FileInputStream.read` runs too. JFR retransforms them with its own JVMTI
 * environment, made after the agent's: the agent's rewrite must come after JFR's, or JFR's
 * rewrite of the agent's leaves the frames of those classes without their context.
 */
public class LiveFlightRecorder {
    static final class Traced extends RuntimeException {
        Traced(String message) {
            super(message);
        }

        @Override
        public synchronized Throwable fillInStackTrace() {
            lucce.Lucce.mark(T.here("fill-exception"));
            return super.fillInStackTrace();
        }

        @Override
        public String getMessage() {
            lucce.Lucce.mark(T.here("get-message"));
            return super.getMessage();
        }
    }

    static final class TracedError extends Error {
        @Override
        public synchronized Throwable fillInStackTrace() {
            lucce.Lucce.mark(T.here("fill-error"));
            return super.fillInStackTrace();
        }
    }

    static int down(int n, boolean error) {
        if (n > 0) {
            return down(n - 1, error) + 1;
        }
        try {
            if (error) {
                throw new TracedError();
            }
            throw new Traced("at the bottom");
        } catch (Traced | TracedError t) {
            return t.toString().length() & 1;
        }
    }

    static long readAll(String path) throws IOException {
        long sum = 0;
        try (FileInputStream in = new FileInputStream(path)) {
            for (int b = in.read(); b >= 0; b = in.read()) {
                sum += b;
            }
        }
        return sum;
    }

    public static void main(String[] args) throws IOException {
        String self = System.getProperty("java.class.path").split(java.io.File.pathSeparator)[0] + "/LiveFlightRecorder.class";
        long sum = 0;
        for (int i = 0; i < 40; i++) {
            sum += down(i % 12, i % 3 == 0);
            sum += readAll(self) & 1;
        }
        lucce.Lucce.mark(T.here("main-end"));
        System.out.println("sum " + sum);
    }
}
