import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

/** Threads: plain threads, an executor, futures, a latch, synchronized counters, thread locals. */
public class Threads {
    static int shared;
    static final Object LOCK = new Object();
    static final ThreadLocal<StringBuilder> TL = ThreadLocal.withInitial(StringBuilder::new);

    static synchronized void bumpStatic() { shared++; }

    static long work(int seed) {
        long x = seed;
        for (int i = 0; i < 20000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            if ((x & 1023) == 7) bumpStatic();
        }
        TL.get().append(seed);
        return x;
    }

    public static void main(String[] args) throws Exception {
        Thread[] ts = new Thread[4];
        long[] results = new long[ts.length];
        for (int i = 0; i < ts.length; i++) {
            final int k = i;
            ts[i] = new Thread(() -> results[k] = work(k + 1), "worker-" + i);
            ts[i].start();
        }
        for (Thread t : ts) t.join();
        System.out.println("threads: " + Arrays.toString(results) + " shared=" + shared);

        ExecutorService pool = Executors.newFixedThreadPool(3);
        List<Future<Long>> fs = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            final int k = i;
            fs.add(pool.submit(() -> work(100 + k)));
        }
        long sum = 0;
        for (Future<Long> f : fs) sum += f.get();
        System.out.println("pool sum: " + sum);

        AtomicInteger atomic = new AtomicInteger();
        CountDownLatch latch = new CountDownLatch(5);
        int[] plain = new int[1];
        for (int i = 0; i < 5; i++) {
            pool.execute(() -> {
                for (int j = 0; j < 1000; j++) {
                    atomic.incrementAndGet();
                    synchronized (LOCK) { plain[0]++; }
                }
                latch.countDown();
            });
        }
        latch.await();
        pool.shutdown();
        System.out.println("pool terminated: " + pool.awaitTermination(1, TimeUnit.MINUTES));
        System.out.println("atomic=" + atomic.get() + " plain=" + plain[0]);

        ConcurrentHashMap<String, Integer> chm = new ConcurrentHashMap<>();
        List<Integer> par = new ArrayList<>();
        for (int i = 0; i < 1000; i++) par.add(i);
        par.parallelStream().forEach(i -> chm.merge("k" + (i % 7), i, Integer::sum));
        System.out.println("chm: " + new TreeMap<>(chm));

        CompletableFuture<String> cf = CompletableFuture.supplyAsync(() -> "async")
            .thenApply(s -> s + "-then").thenCombine(CompletableFuture.completedFuture("!"), String::concat);
        System.out.println(cf.get());
        Thread t = new Thread(() -> { throw new IllegalStateException("uncaught in thread"); });
        t.setUncaughtExceptionHandler((th, e) -> System.out.println("handler got " + e.getMessage()));
        t.start();
        t.join();
    }
}
