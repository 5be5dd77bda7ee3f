//! Random Java programs for the live tests: one seed gives one program (a source file of a dozen
//! classes), the same on every machine. Its functions call each other through every kind of call
//! the JVM has: static, virtual (with `super` calls), interface default methods, constructors,
//! lambdas and method references, reflection, method handles, streams, new threads and a pool,
//! static initializers reached in the middle of a call; inside `try`/`catch`/`finally`, loops,
//! `synchronized` blocks and switches on strings, and they throw exceptions that unwind several
//! frames. They mark events with `Lucce.mark(T.here(label))` (tests/live_scripts/T.java, the
//! independent witness), and `main` prints a checksum of everything they computed, so a run
//! without the agent prints exactly what a run with it must print.
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
    /// `static int fJ(int d, int x)` in class `C<class>`.
    Static { class: usize },
    /// An instance method of class `B`, overridden in `B1` (which may call `super.fJ`); called on
    /// `OBJS[x & 1]`, so either body runs.
    Virtual,
    /// A default method of interface `I`, which `B` implements; called through `I`.
    Default,
    /// `static final IntBinaryOperator LJ = (d, x) -> {...}` in class `C<class>`.
    Lambda { class: usize },
    /// The constructor of class `KJ`, which keeps its result in the field `r`.
    Ctor,
}

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
}

/// One generated program: its source file's name and text, and its main class.
pub struct Program {
    /// Begins the name of each of its classes (`R<seed>`): `<prefix>C0` … `<prefix>C2` hold its
    /// static functions and lambdas.
    pub prefix: String,
    pub main_class: String,
    pub file_name: String,
    pub source: String,
}

/// The program of `seed`.
pub fn program(seed: u64) -> Program {
    let mut g = Gen { rng: Rng(seed), p: format!("R{seed}"), kinds: Vec::new(), marks: 0 };
    let n = 8 + g.rng.below(7);
    for _ in 0..n {
        let kind = match g.rng.below(10) {
            0..=3 => Kind::Static { class: g.rng.below(CLASSES) },
            4 | 5 => Kind::Virtual,
            6 => Kind::Default,
            7 | 8 => Kind::Lambda { class: g.rng.below(CLASSES) },
            _ => Kind::Ctor,
        };
        g.kinds.push(kind);
    }
    // At least one static function: the reflective and method-handle calls need one.
    if !g.kinds.iter().any(|k| matches!(k, Kind::Static { .. })) {
        g.kinds[0] = Kind::Static { class: 0 };
    }
    let source = g.source();
    Program { main_class: format!("{}Main", g.p), file_name: format!("{}Main.java", g.p), source, prefix: g.p }
}

impl Gen {
    fn source(&mut self) -> String {
        let p = self.p.clone();
        let mut statics: Vec<String> = vec![String::new(); CLASSES];
        let (mut base, mut over, mut iface, mut ctors) = (String::new(), String::new(), String::new(), String::new());
        for j in 0..self.kinds.len() {
            match self.kinds[j] {
                Kind::Static { class } => {
                    let body = self.body(j, 1);
                    writeln!(statics[class], "    static int f{j}(int d, int x) {{\n        if (d <= 0) return x + {j};\n{body}        return x;\n    }}").unwrap();
                }
                Kind::Lambda { class } => {
                    let body = self.body(j, 1);
                    writeln!(statics[class], "    static final IntBinaryOperator L{j} = (d, x) -> {{\n        if (d <= 0) return x - {j};\n{body}        return x;\n    }};").unwrap();
                }
                Kind::Virtual => {
                    let body = self.body(j, 1);
                    writeln!(base, "    int f{j}(int d, int x) {{\n        if (d <= 0) return x ^ {j};\n{body}        return x;\n    }}").unwrap();
                    let body = self.body(j, 1);
                    let sup = if self.rng.chance(50) { format!("        x = (x * 31) ^ super.f{j}(d - 1, x);\n") } else { String::new() };
                    writeln!(over, "    @Override\n    int f{j}(int d, int x) {{\n        if (d <= 0) return x | {j};\n{sup}{body}        return x;\n    }}").unwrap();
                }
                Kind::Default => {
                    let body = self.body(j, 1);
                    writeln!(iface, "    default int f{j}(int d, int x) {{\n        if (d <= 0) return x * {};\n{body}        return x;\n    }}", j + 2).unwrap();
                }
                Kind::Ctor => {
                    let body = self.body(j, 1);
                    writeln!(ctors, "final class {p}K{j} {{\n    final int r;\n\n    {p}K{j}(int d, int x) {{\n        if (d <= 0) {{\n            r = x + 1;\n            return;\n        }}\n{body}        r = x;\n    }}\n}}\n").unwrap();
                }
            }
        }
        // main reads every lazy class at its end, so that each initializer runs at least there.
        let lazy_reads: String = (0..LAZY_CLASSES).map(|n| format!(" + {p}L{n}.V")).collect();

        let mut s = String::new();
        writeln!(s, "// Generated by tests/jvm_support/random_java.rs (seed {}): do not edit.", &p[1..]).unwrap();
        s.push_str(
            "import java.lang.invoke.MethodHandle;\nimport java.lang.invoke.MethodHandles;\nimport java.lang.invoke.MethodType;\n\
             import java.lang.reflect.InvocationTargetException;\nimport java.util.concurrent.ExecutionException;\n\
             import java.util.concurrent.ExecutorService;\nimport java.util.concurrent.Executors;\n\
             import java.util.function.IntBinaryOperator;\nimport java.util.function.IntSupplier;\nimport java.util.stream.IntStream;\n\
             import lucce.Lucce;\n\n",
        );
        // main and the call wrappers.
        let statics_j: Vec<usize> = (0..self.kinds.len()).filter(|&j| matches!(self.kinds[j], Kind::Static { .. })).collect();
        writeln!(s, "public final class {p}Main {{").unwrap();
        // Per thread: a task of the pool may run while its caller's thread holds its own.
        writeln!(s, "    static final ThreadLocal<Object> LOCKS = ThreadLocal.withInitial(Object::new);").unwrap();
        writeln!(s, "    static final {p}B[] OBJS = {{ new {p}B(), new {p}B1() }};").unwrap();
        writeln!(
            s,
            "    static final ExecutorService POOL = Executors.newFixedThreadPool(2, r -> {{\n        Thread t = new Thread(r, \"{p}-pool\");\n        t.setDaemon(true);\n        return t;\n    }});"
        )
        .unwrap();
        for &j in &statics_j {
            writeln!(s, "    static final MethodHandle MH{j};").unwrap();
        }
        s.push_str("    static {\n        try {\n            MethodType t = MethodType.methodType(int.class, int.class, int.class);\n");
        for &j in &statics_j {
            let Kind::Static { class } = self.kinds[j] else { unreachable!() };
            writeln!(s, "            MH{j} = MethodHandles.lookup().findStatic({p}C{class}.class, \"f{j}\", t);").unwrap();
        }
        s.push_str("        } catch (ReflectiveOperationException e) {\n            throw new AssertionError(e);\n        }\n    }\n\n");
        // What a caught exception adds to `x`: a Boom's value, else a number for its class (the
        // JVM's own exceptions: division by zero, a bad array index).
        writeln!(s, "    static int code(RuntimeException e) {{\n        return e instanceof {p}Boom b ? b.v : e.getClass().getSimpleName().length();\n    }}\n").unwrap();
        s.push_str(
            "    static RuntimeException rethrow(Throwable t) {\n        if (t instanceof RuntimeException r) return r;\n        if (t instanceof Error e) throw e;\n        return new IllegalStateException(t);\n    }\n\n\
             \x20   static int reflect(Class<?> c, String name, int d, int x) {\n        try {\n            return (Integer) c.getDeclaredMethod(name, int.class, int.class).invoke(null, d, x);\n        } catch (InvocationTargetException e) {\n            throw rethrow(e.getCause());\n        } catch (ReflectiveOperationException e) {\n            throw new AssertionError(e);\n        }\n    }\n\n\
             \x20   static int handle(MethodHandle h, int d, int x) {\n        try {\n            return (int) h.invokeExact(d, x);\n        } catch (Throwable t) {\n            throw rethrow(t);\n        }\n    }\n\n\
             \x20   static int thread(IntSupplier s) {\n        int[] out = new int[1];\n        RuntimeException[] err = new RuntimeException[1];\n        Thread t = new Thread(() -> {\n            try {\n                out[0] = s.getAsInt();\n            } catch (RuntimeException e) {\n                err[0] = e;\n            }\n        });\n        t.start();\n        try {\n            t.join();\n        } catch (InterruptedException e) {\n            throw new AssertionError(e);\n        }\n        if (err[0] != null) throw err[0];\n        return out[0];\n    }\n\n\
             \x20   static int pool(IntSupplier s) {\n        try {\n            return POOL.submit(s::getAsInt).get();\n        } catch (ExecutionException e) {\n            throw rethrow(e.getCause());\n        } catch (InterruptedException e) {\n            throw new AssertionError(e);\n        }\n    }\n\n",
        );
        writeln!(s, "    static int entry(int j, int d, int x) {{\n        switch (j) {{").unwrap();
        for j in 0..self.kinds.len() {
            writeln!(s, "            case {j}: return {};", self.call_expr(j, "d", "x")).unwrap();
        }
        s.push_str("            default: throw new AssertionError(j);\n        }\n    }\n\n");
        writeln!(
            s,
            "    public static void main(String[] args) {{\n        long sum = 0;\n        for (int i = 0; i < {MAIN_CALLS}; i++) {{\n            try {{\n                sum = sum * 31 + entry(i % {n}, {BUDGET}, i * 7919);\n            }} catch (RuntimeException e) {{\n                sum = sum * 31 + {p}Main.code(e);\n            }}\n        }}\n        sum += 0{lazy_reads};\n        Lucce.mark(T.here(\"main-end\"));\n        System.out.println(\"result \" + sum);\n        POOL.shutdown();\n    }}\n}}\n",
            n = self.kinds.len()
        )
        .unwrap();
        // The exception: its stack trace is filled in for half of them (a native walk, no upcall).
        writeln!(s, "final class {p}Boom extends RuntimeException {{\n    final int v;\n\n    {p}Boom(int v) {{\n        super(\"boom \" + v, null, false, (v & 1) == 0);\n        this.v = v;\n    }}\n}}\n").unwrap();
        for (c, body) in statics.iter().enumerate() {
            writeln!(s, "final class {p}C{c} {{\n{body}}}\n").unwrap();
        }
        writeln!(s, "interface {p}I {{\n{iface}}}\n").unwrap();
        writeln!(s, "class {p}B implements {p}I {{\n{base}}}\n").unwrap();
        writeln!(s, "final class {p}B1 extends {p}B {{\n{over}}}\n").unwrap();
        s.push_str(&ctors);
        for n in 0..LAZY_CLASSES {
            let target = self.rng.below(self.kinds.len());
            let call = self.call_expr(target, "2", &n.to_string());
            writeln!(
                s,
                "final class {p}L{n} {{\n    static final int V;\n\n    static {{\n        int v = {n};\n        Lucce.mark(T.here(\"L{n}-clinit\"));\n        try {{\n            v = {call};\n        }} catch (RuntimeException e) {{\n            v = {p}Main.code(e);\n        }}\n        V = v;\n    }}\n}}\n"
            )
            .unwrap();
        }
        s
    }

    /// The expression that calls function `j` directly with arguments `d` and `x`.
    fn call_expr(&self, j: usize, d: &str, x: &str) -> String {
        let p = &self.p;
        match self.kinds[j] {
            Kind::Static { class } => format!("{p}C{class}.f{j}({d}, {x})"),
            Kind::Virtual => format!("{p}Main.OBJS[({x}) & 1].f{j}({d}, {x})"),
            Kind::Default => format!("(({p}I) {p}Main.OBJS[({x}) & 1]).f{j}({d}, {x})"),
            Kind::Lambda { class } => format!("{p}C{class}.L{j}.applyAsInt({d}, {x})"),
            Kind::Ctor => format!("new {p}K{j}({d}, {x}).r"),
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
        format!("{ind}if ((x & {mask}) == 0) Lucce.mark(T.here(\"f{f}m{k}\"));\n")
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
        let static_class = match self.kinds[j] {
            Kind::Static { class } => Some(class),
            _ => None,
        };
        match self.rng.below(15) {
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
            _ => direct,
        }
    }
}
