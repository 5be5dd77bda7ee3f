import org.antlr.v4.runtime.CharStreams;
import org.antlr.v4.runtime.CommonTokenStream;
import org.antlr.v4.runtime.ParserRuleContext;
import org.antlr.v4.runtime.tree.ParseTree;
import org.antlr.v4.runtime.tree.ParseTreeWalker;

/**
 * The workload kit's antlr4 program (its Main.java: parse a generated program with the kit's
 * Expr grammar and walk the tree) repeated in one JVM, printing each iteration's milliseconds:
 * the steady state apart from start-up and compilation (scripts/steady_state.sh).
 * Usage: AntlrSteady INPUT ITERATIONS
 */
public class AntlrSteady {
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[1]);
        for (int i = 0; i < n; i++) {
            long t0 = System.nanoTime();
            CommonTokenStream tokens = new CommonTokenStream(new ExprLexer(CharStreams.fromFileName(args[0])));
            ExprParser parser = new ExprParser(tokens);
            ParseTree tree = parser.prog();
            long[] nodes = {0};
            ParseTreeWalker.DEFAULT.walk(new ExprBaseListener() {
                @Override
                public void enterEveryRule(ParserRuleContext ctx) {
                    nodes[0]++;
                }
            }, tree);
            System.out.printf("iteration %d ms %.1f nodes %d%n", i, (System.nanoTime() - t0) / 1e6, nodes[0]);
        }
    }
}
