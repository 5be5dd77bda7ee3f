//! Random Java programs for the live tests: one seed gives one program (a dozen source files, one
//! class each), the same on every machine. Its functions call each other through every kind of
//! call the JVM has: static, virtual (with `super` calls), interface default methods,
//! constructors, lambdas, method references and anonymous classes, reflection, method handles,
//! streams and other JDK code that calls back, native methods that call back (JNI, the test
//! library of tests/live_scripts/live_jni.c, whose path comes in `-Dlive.jni=`), new threads and
//! a pool, plugins that a class loader of the program's own defines, recursions a few hundred
//! to a few thousand frames deep, static initializers reached in the middle of a call;
//! inside `try`/`catch`/`finally`, loops, `synchronized` blocks and switches on strings, and they
//! throw exceptions (their own, and the JVM's: division by zero, a bad index, a call on null)
//! that unwind several frames. They mark events with `Lucce.mark(T.here(label))`
//! (tests/live_scripts/T.java, the independent witness), and `main` prints a checksum of
//! everything they computed, so a run without the agent prints exactly what a run with it must
//! print. `main ROUNDS` repeats its calls (marking only in the last round) until the JIT
//! compiles them. `main` calls through one class, `E`, which the test leaves out of some
//! recordings and which catches and calls on.
//!
//! Every call passes a budget `d` that its callee spends (`d - 1`) and stops at 0, so every
//! program ends; threads are joined at once and pool tasks awaited, so its output is the same in
//! every run.

use std::fmt::Write;

/// SplitMix64: small, and its sequence never changes with a crate's version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// How a function is declared, which decides how it is called.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `static int fJ(int d, int x)` in class `C<class>`; when `deep` is not 0, its body runs at
    /// the bottom of a recursion `deep` to `deep + 255` frames deep through two call sites (`rJ`),
    /// 10 to 17 deep when `main` is given a number of rounds ([`SHALLOW`]).
    Static { class: usize, deep: u32 },
    /// An instance method of class `B`, overridden in `B1` (which may call `super.fJ`); called on
    /// `OBJS[x & 1]`, so either body runs.
    Virtual,
    /// A default method of interface `I`, which `B` implements; called through `I`.
    Default,
    /// `static final IntBinaryOperator LJ = (d, x) -> {...}` in class `C<class>`.
    Lambda { class: usize },
    /// The constructor of class `KJ`, which keeps its result in the field `r`.
    Ctor,
    /// `applyAsInt` of class `PJ`, which a class loader of the program's own defines (child
    /// first): code outside the plugins reaches one through `Main.plugin(J)` (reflection, once),
    /// plugins each other with `new PJ()`, which the JVM resolves through that loader (an
    /// upcall into its `loadClass`, written in Java).
    Plugin,
}

/// The depth of every recursion when `main` is given a number of rounds (the sampling runs):
/// every distinct context of a recursion inside a recursion is an anchor record, and with depths
/// of a few hundred that vary with `x` a hot run made 95 million of them (seed 22) and ran for
/// minutes; each sample also keeps the JVM's stack.
const SHALLOW: &str = "10 + (x & 7)";
/// The budget `main` gives each call; the call tree of one call of `main`'s loop is at most
/// this deep in functions (wrappers add frames between them).
const BUDGET: u32 = 5;
/// Calls from `main`.
const MAIN_CALLS: usize = 24;
/// Classes holding static functions and lambdas.
const CLASSES: usize = 3;
/// Classes with a static initializer that marks and calls.
const LAZY_CLASSES: usize = 3;

struct Gen {
    rng: Rng,
    /// The class-name prefix, `R<seed>`, so that several programs share a class path.
    p: String,
    kinds: Vec<Kind>,
    /// Mark sites made so far (labels are `f<fn>m<n>`, unique per program).
    marks: usize,
    /// Whether the body being made is a plugin's.
    in_plugin: bool,
}

/// One generated program: its source files (name, text) and its main class.
pub struct Program {
    /// Begins the name of each of its classes (`R<seed>`): `<prefix>C0` … `<prefix>C2` hold its
    /// static functions and lambdas.
    pub prefix: String,
    pub main_class: String,
    pub files: Vec<(String, String)>,
}

/// The program of `seed`.
pub fn program(seed: u64) -> Program {
    let mut g = Gen { rng: Rng(seed), p: format!("R{seed}"), kinds: Vec::new(), marks: 0, in_plugin: false };
    let n = 8 + g.rng.below(7);
    for _ in 0..n {
        let kind = match g.rng.below(11) {
            0..=3 => {
                let deep = match g.rng.below(12) {
                    0..=2 => 100,
                    3 => 2000,
                    _ => 0,
                };
                Kind::Static { class: g.rng.below(CLASSES), deep }
            }
            4 | 5 => Kind::Virtual,
            6 => Kind::Default,
            7 | 8 => Kind::Lambda { class: g.rng.below(CLASSES) },
            9 => Kind::Ctor,
            _ => Kind::Plugin,
        };
        g.kinds.push(kind);
    }
    // At least one static function: the reflective and method-handle calls need one.
    if !g.kinds.iter().any(|k| matches!(k, Kind::Static { .. })) {
        g.kinds[0] = Kind::Static { class: 0, deep: 0 };
    }
    let files = g.files();
    Program { main_class: format!("{}Main", g.p), files, prefix: g.p }
}

/// The imports every file of a program starts with.
const IMPORTS: &str = "import java.lang.invoke.MethodHandle;\nimport java.lang.invoke.MethodHandles;\nimport java.lang.invoke.MethodType;\n\
    import java.lang.reflect.InvocationTargetException;\nimport java.util.concurrent.ExecutionException;\n\
    import java.util.concurrent.ExecutorService;\nimport java.util.concurrent.Executors;\n\
    import java.util.function.IntBinaryOperator;\nimport java.util.function.IntSupplier;\nimport java.util.stream.IntStream;\n\
    import lucce.Lucce;\n";

/// The helpers of `Main` that the call routes go through (not `format!` text).
const HELPERS: &str = "    public static RuntimeException rethrow(Throwable t) {\n        if (t instanceof RuntimeException r) return r;\n        if (t instanceof Error e) throw e;\n        return new IllegalStateException(t);\n    }\n\n\
    public static int reflect(Class<?> c, String name, int d, int x) {\n        try {\n            return (Integer) c.getDeclaredMethod(name, int.class, int.class).invoke(null, d, x);\n        } catch (InvocationTargetException e) {\n            throw rethrow(e.getCause());\n        } catch (ReflectiveOperationException e) {\n            throw new AssertionError(e);\n        }\n    }\n\n\
    public static int handle(MethodHandle h, int d, int x) {\n        try {\n            return (int) h.invokeExact(d, x);\n        } catch (Throwable t) {\n            throw rethrow(t);\n        }\n    }\n\n\
    public static int thread(IntSupplier s) {\n        int[] out = new int[1];\n        RuntimeException[] err = new RuntimeException[1];\n        Thread t = new Thread(() -> {\n            try {\n                out[0] = s.getAsInt();\n            } catch (RuntimeException e) {\n                err[0] = e;\n            }\n        });\n        t.start();\n        try {\n            t.join();\n        } catch (InterruptedException e) {\n            throw new AssertionError(e);\n        }\n        if (err[0] != null) throw err[0];\n        return out[0];\n    }\n\n\
    public static int jni(IntSupplier s) {
        int[] out = new int[1];
        LiveJni.callRunnable(() -> out[0] = s.getAsInt());
        return out[0];
    }

    public static int pool(IntSupplier s) {\n        try {\n            return POOL.submit(s::getAsInt).get();\n        } catch (ExecutionException e) {\n            throw rethrow(e.getCause());\n        } catch (InterruptedException e) {\n            throw new AssertionError(e);\n        }\n    }\n\n";

impl Gen {
    /// The program's source files, one public class each (plugins, defined by another class
    /// loader, are in another runtime package and reach the rest only through public members).
    fn files(&mut self) -> Vec<(String, String)> {
        let p = self.p.clone();
        let mut classes: Vec<(String, String)> = Vec::new();
        let mut statics: Vec<String> = vec![String::new(); CLASSES];
        let (mut base, mut over, mut iface) = (String::new(), String::new(), String::new());
        for j in 0..self.kinds.len() {
            match self.kinds[j] {
                Kind::Static { class, deep: 0 } => {
                    let body = self.body(j, 1);
                    writeln!(statics[class], "    public static int f{j}(int d, int x) {{\n        if (d <= 0) return x + {j};\n{body}        return x;\n    }}").unwrap();
                }
                Kind::Static { class, deep } => {
                    let body = self.body(j, 1);
                    let depth = format!("({p}Main.shallow ? {SHALLOW} : {deep} + (x & 255))");
                    writeln!(
                        statics[class],
                        "    public static int f{j}(int d, int x) {{\n        return r{j}(d, x, {depth});\n    }}\n\n\
                         \x20   static int r{j}(int d, int x, int n) {{\n        if (n > 0) {{\n            if ((n & 1) == 0) return r{j}(d, x + 1, n - 1) + 1;\n            return r{j}(d, x ^ n, n - 1) - 1;\n        }}\n\
                         \x20       if (d <= 0) return x + {j};\n{body}        return x;\n    }}"
                    )
                    .unwrap();
                }
                Kind::Lambda { class } => {
                    let body = self.body(j, 1);
                    writeln!(statics[class], "    public static final IntBinaryOperator L{j} = (d, x) -> {{\n        if (d <= 0) return x - {j};\n{body}        return x;\n    }};").unwrap();
                }
                Kind::Virtual => {
                    let body = self.body(j, 1);
                    writeln!(base, "    public int f{j}(int d, int x) {{\n        if (d <= 0) return x ^ {j};\n{body}        return x;\n    }}").unwrap();
                    let body = self.body(j, 1);
                    let sup = if self.rng.chance(50) { format!("        x = (x * 31) ^ super.f{j}(d - 1, x);\n") } else { String::new() };
                    writeln!(over, "    @Override\n    public int f{j}(int d, int x) {{\n        if (d <= 0) return x | {j};\n{sup}{body}        return x;\n    }}").unwrap();
                }
                Kind::Default => {
                    let body = self.body(j, 1);
                    writeln!(iface, "    default int f{j}(int d, int x) {{\n        if (d <= 0) return x * {};\n{body}        return x;\n    }}", j + 2).unwrap();
                }
                Kind::Plugin => {
                    self.in_plugin = true;
                    let body = self.body(j, 1);
                    self.in_plugin = false;
                    classes.push((
                        format!("{p}P{j}"),
                        format!("public final class {p}P{j} implements IntBinaryOperator {{\n    public int applyAsInt(int d, int x) {{\n        if (d <= 0) return x - {j} * 3;\n{body}        return x;\n    }}\n}}\n"),
                    ));
                }
                Kind::Ctor => {
                    let body = self.body(j, 1);
                    classes.push((
                        format!("{p}K{j}"),
                        format!("public final class {p}K{j} {{\n    public final int r;\n\n    public {p}K{j}(int d, int x) {{\n        if (d <= 0) {{\n            r = x + 1;\n            return;\n        }}\n{body}        r = x;\n    }}\n}}\n"),
                    ));
                }
            }
        }
        for (c, body) in statics.into_iter().enumerate() {
            classes.push((format!("{p}C{c}"), format!("public final class {p}C{c} {{\n{body}}}\n")));
        }
        classes.push((format!("{p}I"), format!("public interface {p}I {{\n{iface}}}\n")));
        classes.push((format!("{p}B"), format!("public class {p}B implements {p}I {{\n{base}}}\n")));
        classes.push((format!("{p}B1"), format!("public final class {p}B1 extends {p}B {{\n{over}}}\n")));
        // The exception: its stack trace is filled in for half of them (a native walk, no upcall).
        classes.push((
            format!("{p}Boom"),
            format!("public final class {p}Boom extends RuntimeException {{\n    public final int v;\n\n    public {p}Boom(int v) {{\n        super(\"boom \" + v, null, false, (v & 1) == 0);\n        this.v = v;\n    }}\n}}\n"),
        ));
        for n in 0..LAZY_CLASSES {
            let target = self.rng.below(self.kinds.len());
            let call = self.call_expr(target, "2", &n.to_string());
            classes.push((
                format!("{p}L{n}"),
                format!("public final class {p}L{n} {{\n    public static final int V;\n\n    static {{\n        int v = {n};\n        if (!{p}Main.quiet) Lucce.mark(T.here(\"L{n}-clinit\"));\n        try {{\n            v = {call};\n        }} catch (RuntimeException e) {{\n            v = {p}Main.code(e);\n        }}\n        V = v;\n    }}\n}}\n"),
            ));
        }
        // The plugins' class loader: child first for them, the application's loader for the rest
        // (`lucce.*` included, as a loader must delegate it).
        classes.push((
            format!("{p}Loader"),
            format!(
                "public final class {p}Loader extends ClassLoader {{\n    public {p}Loader() {{\n        super({p}Main.class.getClassLoader());\n    }}\n\n\
                 \x20   @Override\n    protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {{\n        if (!name.startsWith(\"{p}P\")) return super.loadClass(name, resolve);\n\
                 \x20       synchronized (getClassLoadingLock(name)) {{\n            Class<?> c = findLoadedClass(name);\n            if (c == null) {{\n\
                 \x20               try (java.io.InputStream in = getParent().getResourceAsStream(name + \".class\")) {{\n                    byte[] b = in.readAllBytes();\n                    c = defineClass(name, b, 0, b.length);\n\
                 \x20               }} catch (java.io.IOException e) {{\n                    throw new ClassNotFoundException(name, e);\n                }}\n            }}\n\
                 \x20           if (resolve) resolveClass(c);\n            return c;\n        }}\n    }}\n}}\n"
            ),
        ));
        classes.push((format!("{p}E"), self.entries()));
        classes.push((format!("{p}Main"), self.main_class()));
        let seed = &p[1..];
        classes
            .into_iter()
            .map(|(name, text)| (format!("{name}.java"), format!("// Generated by tests/jvm_support/random_java.rs (seed {seed}): do not edit.\n{IMPORTS}\n{text}")))
            .collect()
    }

    /// `Main`: `main`, the call routes' helpers and the shared objects.
    fn main_class(&self) -> String {
        let p = &self.p;
        let n = self.kinds.len();
        let mut s = String::new();
        let statics_j: Vec<usize> = (0..n).filter(|&j| matches!(self.kinds[j], Kind::Static { .. })).collect();
        writeln!(s, "public final class {p}Main {{").unwrap();
        // Per thread: a task of the pool may run while its caller's thread holds its own.
        writeln!(s, "    public static final ThreadLocal<Object> LOCKS = ThreadLocal.withInitial(Object::new);").unwrap();
        writeln!(s, "    public static final {p}B[] OBJS = {{ new {p}B(), new {p}B1() }};").unwrap();
        // A call on null throws in the caller, before entering anything (C2: a preallocated
        // exception once the site is hot).
        writeln!(s, "    public static final {p}B[] MAYBE = {{ new {p}B1(), null }};").unwrap();
        // Marks are off in every round of `main` but the last (`main ROUNDS`: the rounds before
        // warm the JIT up).
        writeln!(s, "    public static boolean quiet;").unwrap();
        writeln!(s, "    public static boolean shallow;").unwrap();
        writeln!(
            s,
            "    public static final ExecutorService POOL = Executors.newFixedThreadPool(2, r -> {{\n        Thread t = new Thread(r, \"{p}-pool\");\n        t.setDaemon(true);\n        return t;\n    }});"
        )
        .unwrap();
        writeln!(s, "    static final ClassLoader LOADER = new {p}Loader();").unwrap();
        writeln!(s, "    static final IntBinaryOperator[] PLUGINS = new IntBinaryOperator[{n}];").unwrap();
        for &j in &statics_j {
            writeln!(s, "    public static final MethodHandle MH{j};").unwrap();
        }
        s.push_str("    static {\n        System.load(System.getProperty(\"live.jni\"));\n        try {\n            MethodType t = MethodType.methodType(int.class, int.class, int.class);\n");
        for &j in &statics_j {
            let Kind::Static { class, .. } = self.kinds[j] else { unreachable!() };
            writeln!(s, "            MH{j} = MethodHandles.lookup().findStatic({p}C{class}.class, \"f{j}\", t);").unwrap();
        }
        s.push_str("        } catch (ReflectiveOperationException e) {\n            throw new AssertionError(e);\n        }\n    }\n\n");
        // What a caught exception adds to `x`: a Boom's value, else a number for its class (the
        // JVM's own exceptions: division by zero, a bad array index).
        writeln!(s, "    public static int code(RuntimeException e) {{\n        return e instanceof {p}Boom b ? b.v : e.getClass().getSimpleName().length();\n    }}\n").unwrap();
        // A plugin (another runtime package: its constructor is public, its class is too), made
        // once; two threads may both make one, which changes nothing.
        writeln!(
            s,
            "    public static IntBinaryOperator plugin(int j) {{\n        if (PLUGINS[j] == null) {{\n            try {{\n                PLUGINS[j] = (IntBinaryOperator) Class.forName(\"{p}P\" + j, true, LOADER).getConstructor().newInstance();\n            }} catch (ReflectiveOperationException e) {{\n                throw new AssertionError(e);\n            }}\n        }}\n        return PLUGINS[j];\n    }}\n"
        )
        .unwrap();
        s.push_str(HELPERS);
        // main reads every lazy class at its end, so that each initializer runs at least there.
        let lazy_reads: String = (0..LAZY_CLASSES).map(|n| format!(" + {p}L{n}.V")).collect();
        writeln!(
            s,
            "    public static void main(String[] args) {{\n        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 1;\n        shallow = args.length > 0;\n        long sum = 0;\n        for (int round = 0; round < rounds; round++) {{\n            quiet = round < rounds - 1;\n            for (int i = 0; i < {MAIN_CALLS}; i++) {{\n                try {{\n                    sum = sum * 31 + {p}E.entry(i % {n}, {BUDGET}, i * 7919 + round);\n                }} catch (RuntimeException e) {{\n                    sum = sum * 31 + code(e);\n                }}\n            }}\n        }}\n        sum += 0{lazy_reads};\n        Lucce.mark(T.here(\"main-end\"));\n        System.out.println(\"result \" + sum);\n        POOL.shutdown();\n    }}\n}}\n"
        )
        .unwrap();
        s
    }

    /// The virtual function that calls on `MAYBE` (null half the time) go to: the first.
    fn nullable(&self) -> Option<usize> {
        self.kinds.iter().position(|&k| k == Kind::Virtual)
    }

    /// `E.entry(j, d, x)`, through which `main` calls function `j`: the test leaves this class
    /// out of some recordings. It catches what the call throws and at once calls the function
    /// that calls on null go to (else `j`): when a call on null threw before entering it, that
    /// entry comes from code lucce cannot see while the failed call's record is pending, which
    /// the handler's drop probe must have cleared.
    fn entries(&self) -> String {
        let p = &self.p;
        let n = self.kinds.len();
        let mut s = format!("public final class {p}E {{\n    public static int entry(int j, int d, int x) {{\n        try {{\n            switch (j) {{\n");
        for j in 0..n {
            writeln!(s, "                case {j}: return {};", self.call_expr(j, "d", "x")).unwrap();
        }
        s.push_str("                default: throw new AssertionError(j);\n            }\n        } catch (RuntimeException e) {\n            switch (j) {\n");
        for j in 0..n {
            let k = self.nullable().unwrap_or(j);
            writeln!(s, "                case {j}: return {} ^ {p}Main.code(e);", self.call_expr(k, "1", "x")).unwrap();
        }
        s.push_str("                default: throw new AssertionError(j);\n            }\n        }\n    }\n}\n");
        s
    }

    /// The expression that calls function `j` directly with arguments `d` and `x`.
    fn call_expr(&self, j: usize, d: &str, x: &str) -> String {
        let p = &self.p;
        match self.kinds[j] {
            Kind::Static { class, .. } => format!("{p}C{class}.f{j}({d}, {x})"),
            Kind::Virtual => format!("{p}Main.OBJS[({x}) & 1].f{j}({d}, {x})"),
            Kind::Default => format!("(({p}I) {p}Main.OBJS[({x}) & 1]).f{j}({d}, {x})"),
            Kind::Lambda { class } => format!("{p}C{class}.L{j}.applyAsInt({d}, {x})"),
            Kind::Ctor => format!("new {p}K{j}({d}, {x}).r"),
            Kind::Plugin if self.in_plugin => format!("new {p}P{j}().applyAsInt({d}, {x})"),
            Kind::Plugin => format!("{p}Main.plugin({j}).applyAsInt({d}, {x})"),
        }
    }

    /// Statements of function `f`'s body at nesting `depth` (indented by it), each updating `x`;
    /// the top level always marks once.
    fn body(&mut self, f: usize, depth: usize) -> String {
        let count = if depth == 1 { 2 + self.rng.below(3) } else { 1 + self.rng.below(2) };
        let mark_at = self.rng.below(count);
        let mut out = String::new();
        for i in 0..count {
            if depth == 1 && i == mark_at {
                out.push_str(&self.mark(f, depth));
            }
            out.push_str(&self.statement(f, depth));
        }
        out
    }

    fn mark(&mut self, f: usize, depth: usize) -> String {
        let ind = "    ".repeat(depth + 1);
        let k = self.marks;
        self.marks += 1;
        let mask = [0, 1, 3, 7][self.rng.below(4)];
        format!("{ind}if (!{}Main.quiet && (x & {mask}) == 0) Lucce.mark(T.here(\"f{f}m{k}\"));\n", self.p)
    }

    fn statement(&mut self, f: usize, depth: usize) -> String {
        let ind = "    ".repeat(depth + 1);
        let p = self.p.clone();
        let nested = depth < 3;
        match self.rng.below(if nested { 16 } else { 9 }) {
            0..=2 => {
                let call = self.call();
                if call.contains("x0") {
                    // Lambdas capture a copy: `x` itself is not effectively final.
                    format!("{ind}{{\n{ind}    final int x0 = x;\n{ind}    x = (x * 31) ^ {call};\n{ind}}}\n")
                } else {
                    format!("{ind}x = (x * 31) ^ {call};\n")
                }
            }
            3 => self.mark(f, depth),
            4 => {
                let (m, r) = (5 + self.rng.below(9), self.rng.below(5));
                // Thrown by a constructor and `athrow`, or by the JVM itself with no call at all.
                match self.rng.below(3) {
                    0 => format!("{ind}if (x % {m} == {r}) throw new {p}Boom(x);\n"),
                    1 => format!("{ind}x += 1000 / (x % {m} == {r} ? 0 : 1);\n"),
                    _ => format!("{ind}x += new int[] {{ 1, 2 }}[x % {m} == {r} ? 2 : 1];\n"),
                }
            }
            5 => format!("{ind}x += (\"s\" + x + \":\" + d).length();\n"),
            6 => format!("{ind}x += new int[(x & 7) + 1].length + new Object().hashCode() * 0;\n"),
            7 => {
                let n = self.rng.below(LAZY_CLASSES);
                format!("{ind}x = (x * 31) ^ {p}L{n}.V;\n")
            }
            8 => {
                // JDK methods, some of them JIT intrinsics.
                let m = 997 + self.rng.below(1000);
                let call = [format!("Math.floorMod(x, {m})"), "Integer.rotateLeft(x, 3)".into(), "Integer.bitCount(x)".into(), format!("Long.hashCode(x * {m}L)")][self.rng.below(4)].clone();
                format!("{ind}x = (x * 31) ^ {call};\n")
            }
            9 | 10 => {
                let inner = self.body(f, depth + 1);
                let catch_body = if self.rng.chance(50) { self.mark(f, depth + 1) } else { String::new() };
                format!("{ind}try {{\n{inner}{ind}}} catch (RuntimeException e) {{\n{ind}    x ^= {p}Main.code(e);\n{catch_body}{ind}}}\n")
            }
            11 => {
                let inner = self.body(f, depth + 1);
                let mut fin = self.body(f, depth + 1);
                if self.kinds[f] != Kind::Ctor && self.rng.chance(30) {
                    // Drops whatever exception was unwinding through the `try`.
                    writeln!(fin, "{ind}    if ((x & 3) == 1) return x;").unwrap();
                }
                format!("{ind}try {{\n{inner}{ind}}} finally {{\n{fin}{ind}}}\n")
            }
            12 => {
                let inner = self.body(f, depth + 1);
                format!("{ind}for (int k{depth} = 0; k{depth} < (x & 3); k{depth}++) {{\n{inner}{ind}    x += k{depth};\n{ind}}}\n")
            }
            13 => {
                let inner = self.body(f, depth + 1);
                format!("{ind}synchronized ({p}Main.LOCKS.get()) {{\n{inner}{ind}}}\n")
            }
            _ => {
                let mut cases = String::new();
                for c in 0..3 {
                    let inner = self.body(f, depth + 2);
                    writeln!(cases, "{ind}    case \"k{c}\": {{\n{inner}{ind}        break;\n{ind}    }}").unwrap();
                }
                format!("{ind}switch (\"k\" + (x & 3)) {{\n{cases}{ind}    default:\n{ind}        x++;\n{ind}}}\n")
            }
        }
    }

    /// An expression that calls a random function with `d - 1` and `x` (or `x0`, a copy the
    /// caller declares, inside lambdas), through a random route.
    fn call(&mut self) -> String {
        let p = self.p.clone();
        let j = self.rng.below(self.kinds.len());
        let direct = self.call_expr(j, "d - 1", "x");
        let nullable = self.nullable();
        let static_class = match self.kinds[j] {
            Kind::Static { class, .. } => Some(class),
            _ => None,
        };
        match self.rng.below(16) {
            0 if static_class.is_some() => format!("{p}Main.reflect({p}C{}.class, \"f{j}\", d - 1, x)", static_class.unwrap()),
            1 if static_class.is_some() => format!("{p}Main.handle({p}Main.MH{j}, d - 1, x)"),
            2 if static_class.is_some() => format!("((IntBinaryOperator) {p}C{}::f{j}).applyAsInt(d - 1, x)", static_class.unwrap()),
            3 => format!("IntStream.range(0, (x & 3) + 1).map(y -> {}).sum()", self.call_expr(j, "d - 1", "y ^ x0")),
            // The JDK's code calls back into the program.
            6 => format!("new java.util.HashMap<Integer, Integer>().computeIfAbsent(x0, k -> {})", self.call_expr(j, "d - 1", "k")),
            7 => format!(
                "java.util.Arrays.stream(new Integer[] {{ x0, x0 + 1, x0 + 2 }}).sorted((a, b) -> Integer.compare({} & 7, b)).mapToInt(Integer::intValue).sum()",
                self.call_expr(j, "d - 1", "a")
            ),
            8 => format!("new IntBinaryOperator() {{\n            public int applyAsInt(int dd, int xx) {{\n                return {};\n            }}\n        }}.applyAsInt(d - 1, x)", self.call_expr(j, "dd", "xx")),
            // On null half the time (see `entries`).
            9 if nullable.is_some() => format!("{p}Main.MAYBE[(x >>> 4) & 1].f{}(d - 1, x)", nullable.unwrap()),
            // Threads and the pool only near the top of the call tree: at most a few per call
            // of main.
            4 => {
                let inner = self.call_expr(j, "d - 1", "x0");
                format!("(d >= {} ? {p}Main.thread(() -> {inner}) : {direct})", BUDGET)
            }
            5 => {
                let inner = self.call_expr(j, "d - 1", "x0");
                format!("(d >= {} ? {p}Main.pool(() -> {inner}) : {direct})", BUDGET - 1)
            }
            // Through a native frame, which an exception from the callback unwinds too.
            10 => format!("{p}Main.jni(() -> {})", self.call_expr(j, "d - 1", "x0")),
            _ => direct,
        }
    }
}
