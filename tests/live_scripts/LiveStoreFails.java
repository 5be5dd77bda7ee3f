import java.io.File;

/**
 * The store's writer fails in the middle of the run: the program must run on and the JVM exit as
 * it would without the agent. Args: STORE MODE. MODE "blobs" replaces the store's directory of
 * large values with a file first, so that sled cannot write the next block of deep stacks (with
 * sled 0.34 the agent's close then waited forever); "size" leaves the store alone (the test
 * limits the size of every file the JVM writes, `ulimit -f`).
 */
public class LiveStoreFails {
    static int down(int n) {
        return n <= 1 ? 1 : down(n - 1) + n % 7;
    }

    public static void main(String[] args) throws Exception {
        if (args[1].equals("blobs")) {
            File blobs = new File(args[0], "blobs");
            File[] inside = blobs.listFiles();
            if (inside == null) throw new IllegalStateException(blobs + " is not a directory");
            for (File f : inside) f.delete();
            if (!blobs.delete() || !blobs.createNewFile()) throw new IllegalStateException("cannot replace " + blobs);
        }
        long sum = 0;
        for (int i = 0; i < 400; i++) sum += down(1000);
        System.out.println("done " + sum);
    }
}
