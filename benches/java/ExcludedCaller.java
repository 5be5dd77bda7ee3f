/** Calls from a class the agent leaves alone (`exclude=Caller`) into an instrumented method that
 *  calls on: each such entry finds its caller by a stack walk, which the thread's walk memo
 *  answers after the first (docs/agent.md, "Known limits"); the memo's key is the stack below
 *  the caller frame, so its cost grows with DEPTH, the frames below it.
 *  `java -agentpath:…=out=DIR,loglevel=info[,exclude=Caller] -cp CLASSES ExcludedCaller N [DEPTH]`. */
public class ExcludedCaller {
    static int n;

    static void f() {
        g();
    }

    static void g() {
        n++;
    }

    static void down(int depth, int calls) {
        if (depth == 0) {
            Caller.loop(calls);
        } else {
            down(depth - 1, calls);
        }
    }

    public static void main(String[] args) {
        int calls = Integer.parseInt(args[0]);
        int depth = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        long t0 = System.nanoTime();
        down(depth, calls);
        long ns = System.nanoTime() - t0;
        System.out.println(n + " calls in " + ns / 1_000_000 + " ms (" + ns / Math.max(calls, 1) + " ns per call) at depth " + depth);
    }
}

class Caller {
    static void loop(int calls) {
        for (int i = 0; i < calls; i++) {
            ExcludedCaller.f();
        }
    }
}
