import java.io.File;
import java.util.Random;
import lucce.Lucce;

/**
 * The store's writer fails in the middle of the run: the program must run on and the JVM exit as
 * it would without the agent. Args: STORE MODE. MODE "blobs" moves the store's directory of
 * large values aside (to blobs.kept, which the test puts back) and puts a file in its place, then
 * marks an event whose label no compression shrinks below sled's size for a large value (128
 * KiB), so that sled cannot write the block that holds it (with sled 0.34 the agent's close then
 * waited forever). Blocks of deep stacks alone compress below it, so whether they became large
 * values depended on how sled's commits fell. "size" leaves the store alone (the test limits the
 * size of every file the JVM writes, `ulimit -f`).
 */
public class LiveStoreFails {
    static int down(int n) {
        return n <= 1 ? 1 : down(n - 1) + n % 7;
    }

    public static void main(String[] args) throws Exception {
        if (args[1].equals("blobs")) {
            // Moved aside, not emptied: a block committed before may be a large value already.
            File blobs = new File(args[0], "blobs");
            if (!blobs.renameTo(new File(args[0], "blobs.kept")) || !blobs.createNewFile()) {
                throw new IllegalStateException("cannot replace " + blobs);
            }
            Random random = new Random(65);
            StringBuilder label = new StringBuilder();
            while (label.length() < 400_000) label.append(Character.forDigit(random.nextInt(36), 36));
            Lucce.mark(label.toString());
        }
        long sum = 0;
        for (int i = 0; i < 400; i++) sum += down(1000);
        System.out.println("done " + sum);
    }
}
