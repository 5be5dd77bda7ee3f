import lucce.Lucce;

/** Defined by LiveLoader's MarkingLoader: resolving LiveLoadedB from here calls its loadClass. */
public class LiveLoadedA {
    static { Lucce.mark(T.here("loadedA-clinit")); }

    public static int run(int n) {
        Lucce.mark(T.here("loadedA-run-" + n));
        return LiveLoadedB.twice(n) + new LiveLoadedC().get();
    }
}

class LiveLoadedB {
    static { Lucce.mark(T.here("loadedB-clinit")); }

    static int twice(int n) {
        Lucce.mark(T.here("loadedB-twice-" + n));
        return 2 * n;
    }
}

class LiveLoadedC {
    int get() {
        Lucce.mark(T.here("loadedC-get"));
        return 1;
    }
}
