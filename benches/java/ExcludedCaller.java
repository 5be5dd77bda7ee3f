/** Calls from a class the agent leaves alone (`exclude=Caller`) into an instrumented method that
 *  calls on: each such entry finds its caller by a stack walk (docs/agent.md, "Known limits").
 *  `java -agentpath:…=out=DIR,loglevel=info[,exclude=Caller] -cp CLASSES ExcludedCaller N`. */
public class ExcludedCaller {
    static int n;

    static void f() {
        g();
    }

    static void g() {
        n++;
    }

    public static void main(String[] args) {
        int calls = Integer.parseInt(args[0]);
        long t0 = System.nanoTime();
        Caller.loop(calls);
        System.out.println(n + " calls in " + (System.nanoTime() - t0) / 1_000_000 + " ms");
    }
}

class Caller {
    static void loop(int calls) {
        for (int i = 0; i < calls; i++) {
            ExcludedCaller.f();
        }
    }
}
