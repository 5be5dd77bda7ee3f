/**
 * Threads that catch `ThreadDeath` and run on, each stopped several times: every stop must reach
 * its thread exactly once. Recorded with `sample=` and `verify=1`, many stops land in the agent's
 * Java helper, and the agent throws them on as its native method returns; a stop it cleared
 * leaves a thread that never re-arms, one it threw twice a thread that finishes early.
 *
 * Each stop waits until its thread has caught the one before and is back in its loop. HotSpot
 * drops a stop aimed at a thread that has not yet taken the previous one (a thread in native code
 * takes it only on its way back to Java), so stops in quick succession can be lost with or
 * without the agent, and the agent's slow paths, in native code, only widen that window.
 */
public class LiveStoppedAgain {
    static final int STOPS = 4;
    static volatile long sink;

    static long down(int d) {
        return d == 0 ? sink + Integer.toString(d).length() : down(d - 1) + 1;
    }

    static final class Victim extends Thread {
        final int depth;
        /** Set inside the `try`: the stop numbered `armed` may come now. */
        volatile int armed;
        volatile int caught;

        Victim(int i) {
            super("victim-" + i);
            depth = 20 + i;
        }

        @Override
        public void run() {
            sink += down(depth);
            while (caught < STOPS) {
                try {
                    armed = caught + 1;
                    while (true) {
                        sink += down(depth);
                        Thread.yield();
                    }
                } catch (ThreadDeath td) {
                    caught++;
                }
            }
        }
    }

    @SuppressWarnings("removal")
    public static void main(String[] args) throws InterruptedException {
        Victim[] victims = new Victim[Integer.parseInt(args[0])];
        for (int i = 0; i < victims.length; i++) {
            victims[i] = new Victim(i);
            victims[i].start();
        }
        // Stops sent to a thread armed for exactly that stop: fewer than STOPS if a thread died, or
        // ran ahead because it caught a stop nobody sent.
        int sent = 0;
        for (int stop = 1; stop <= STOPS; stop++) {
            for (Victim v : victims) {
                // A guard, not a measure: a stop lost leaves its thread unarmed forever.
                long deadline = System.nanoTime() + 60_000_000_000L;
                while (v.armed < stop && v.isAlive()) {
                    if (System.nanoTime() > deadline) {
                        System.out.println(v.getName() + " never armed for stop " + stop + ", caught " + v.caught);
                        System.exit(1);
                    }
                    Thread.onSpinWait();
                }
                if (v.armed == stop && v.isAlive()) {
                    v.stop();
                    sent++;
                }
            }
        }
        int caught = 0;
        for (Victim v : victims) {
            v.join();
            caught += v.caught;
        }
        System.out.println("threads " + victims.length + ", stops sent " + sent + ", caught " + caught);
    }
}
