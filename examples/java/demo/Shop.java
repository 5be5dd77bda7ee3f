package demo;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import lucce.Lucce;

/**
 * The bundled example `lucce demo` records: a small shop that parses price formulas with a
 * recursive-descent parser, prices orders on a thread pool, rejects a bad order with an
 * exception, and loads a discount plugin by reflection. It marks interesting moments with
 * {@code Lucce.mark} and keeps a context token per order, as a leak or allocation tool would.
 */
public class Shop {
    public static void main(String[] args) throws Exception {
        Lucce.mark("shop opens");
        List<String> formulas = List.of("2*(3+4)", "10-(2*3)-1", "((1+2)*(3+4))*5", "7*bad");
        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<Future<Long>> prices = new ArrayList<>();
        for (String f : formulas) {
            prices.add(pool.submit(() -> price(f)));
        }
        long total = 0;
        for (Future<Long> p : prices) {
            total += p.get();
        }
        pool.shutdown();
        Plugin plugin = (Plugin) Class.forName("demo.Shop$TenPercent").getDeclaredConstructor().newInstance();
        total = plugin.apply(total);
        System.out.println("total after discount: " + total);
        System.out.println("deep formula: " + new Parser(nested(3000)).parse());
        System.out.println("order tokens: " + Order.SITES);
    }

    static long price(String formula) {
        try {
            long p = new Parser(formula).parse();
            Order.created(formula);
            return p;
        } catch (IllegalArgumentException e) {
            Lucce.mark("rejected order " + formula + ": " + e.getMessage());
            return 0;
        }
    }

    /** "(1+(1+(...(1+1)...)))": a recursion 3 methods deep per level, through two sites of expr. */
    static String nested(int depth) {
        return "(1+".repeat(depth) + "1" + ")".repeat(depth);
    }

    /** Records where each order object was made, as a token, like an allocation tracker. */
    static final class Order {
        static final List<Long> SITES = new ArrayList<>();

        static synchronized void created(String formula) {
            SITES.add(Lucce.context());
        }
    }

    interface Plugin {
        long apply(long total);
    }

    public static final class TenPercent implements Plugin {
        @Override
        public long apply(long total) {
            Lucce.mark("discount plugin, called through reflection");
            return total - total / 10;
        }
    }

    /** expr := term (('+'|'-') term)*; term := factor ('*' factor)*; factor := digits | '(' expr ')' */
    static final class Parser {
        private final String s;
        private int i;
        private int depth;

        Parser(String s) {
            this.s = s;
        }

        long parse() {
            long v = expr();
            if (i != s.length()) {
                throw new IllegalArgumentException("unexpected '" + s.charAt(i) + "' at " + i);
            }
            return v;
        }

        private long expr() {
            long v = term();
            while (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
                char op = s.charAt(i++);
                long t = term();
                v = op == '+' ? v + t : v - t;
            }
            return v;
        }

        private long term() {
            long v = factor();
            while (i < s.length() && s.charAt(i) == '*') {
                i++;
                v *= factor();
            }
            return v;
        }

        private long factor() {
            if (i < s.length() && s.charAt(i) == '(') {
                i++;
                depth++;
                long v = expr();
                depth--;
                i++; // ')'
                return v;
            }
            int start = i;
            while (i < s.length() && Character.isDigit(s.charAt(i))) {
                i++;
            }
            if (start == i) {
                throw new IllegalArgumentException("unexpected '" + s.charAt(i) + "' at " + i);
            }
            if (depth == 3000) {
                Lucce.mark("number at column " + start + ", " + depth + " parentheses down");
            }
            return Long.parseLong(s, start, i, 10);
        }
    }
}
