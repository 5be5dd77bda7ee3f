/**
 * Threads stopped with `Thread.stop` while they run: each must die of the ThreadDeath, with or
 * without the agent. Recorded with `sample=` and `verify=1`, a thread spends most of its time in
 * the agent's Java helper that takes the JVM's trace (`lucce.Runtime.truth`), where the
 * ThreadDeath often arrives: the agent must throw it on to the program, not clear it (the thread
 * then ran on, saw only the interrupt flag `stop` also sets, and returned).
 */
public class LiveStopped {
    static volatile long sink;
    static volatile boolean running;

    static long down(int d) {
        return d == 0 ? sink : down(d - 1) + 1;
    }

    @SuppressWarnings("removal")
    public static void main(String[] args) throws InterruptedException {
        int victims = Integer.parseInt(args[0]);
        int ranOn = 0;
        for (int k = 0; k < victims; k++) {
            boolean[] returned = {false};
            Thread t = new Thread(() -> {
                running = true;
                long seen = 0;
                while (seen < 1000) {
                    sink += down(20);
                    if (Thread.currentThread().isInterrupted()) {
                        seen++;
                    }
                }
                returned[0] = true;
            }, "victim-" + k);
            t.start();
            while (!running) {
                Thread.onSpinWait();
            }
            Thread.sleep(20);
            t.stop();
            t.join();
            running = false;
            if (returned[0]) {
                ranOn++;
            }
        }
        System.out.println("stopped " + victims + ", ran on after the stop " + ranOn);
    }
}
