import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.Future;
import java.util.concurrent.RecursiveTask;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ArrayBlockingQueue;

import lucce.Lucce;

/** Plain threads (subclass, Runnable, lambda), an ExecutorService, CallerRuns, ForkJoin. */
public class LiveThreads {
    static class Worker extends Thread {
        final int id;
        Worker(int id) { super("worker-" + id); this.id = id; }
        @Override public void run() {
            Lucce.mark(T.here("thread-subclass-" + id));
            step(id, 3);
        }
    }

    static void step(int id, int n) {
        if (n == 0) {
            Lucce.mark(T.here("thread-step-" + id));
            return;
        }
        step(id, n - 1);
    }

    static class Task implements Runnable {
        final String name;
        Task(String name) { this.name = name; }
        public void run() { Lucce.mark(T.here("runnable-" + name)); }
    }

    static int compute(int i) {
        Lucce.mark(T.here("callable-" + i));
        return i * i;
    }

    static class Sum extends RecursiveTask<Integer> {
        final int lo, hi;
        Sum(int lo, int hi) { this.lo = lo; this.hi = hi; }
        @Override protected Integer compute() {
            if (hi - lo <= 1) {
                Lucce.mark(T.here("fork-join-" + lo));
                return lo;
            }
            int mid = (lo + hi) >>> 1;
            Sum left = new Sum(lo, mid);
            left.fork();
            int right = new Sum(mid, hi).compute();
            return left.join() + right;
        }
    }

    public static void main(String[] args) throws Exception {
        Lucce.mark(T.here("main-start"));
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 3; i++) threads.add(new Worker(i));
        threads.add(new Thread(new Task("plain"), "plain-runnable"));
        threads.add(new Thread(() -> Lucce.mark(T.here("lambda-thread")), "lambda-thread"));
        for (Thread t : threads) t.start();
        for (Thread t : threads) t.join();

        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<Future<Integer>> futures = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            final int k = i;
            Callable<Integer> c = () -> compute(k);
            futures.add(pool.submit(c));
        }
        for (int i = 0; i < 4; i++) pool.execute(new Task("pooled-" + i));
        int sum = 0;
        for (Future<Integer> f : futures) sum += f.get();
        List<Callable<Integer>> all = new ArrayList<>();
        for (int i = 100; i < 104; i++) {
            final int k = i;
            all.add(() -> compute(k));
        }
        for (Future<Integer> f : pool.invokeAll(all)) sum += f.get();
        pool.shutdown();
        if (!pool.awaitTermination(1, TimeUnit.MINUTES)) throw new AssertionError("pool did not end");

        // A saturated pool with CallerRunsPolicy: some tasks run on the submitting thread.
        ThreadPoolExecutor tight = new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS, new ArrayBlockingQueue<>(1),
            new ThreadPoolExecutor.CallerRunsPolicy());
        for (int i = 0; i < 6; i++) tight.execute(new Task("tight-" + i));
        tight.shutdown();
        if (!tight.awaitTermination(1, TimeUnit.MINUTES)) throw new AssertionError("tight pool did not end");

        ForkJoinPool fj = new ForkJoinPool(2);
        sum += fj.invoke(new Sum(0, 8));
        fj.shutdown();
        ExecutorService single = Executors.newSingleThreadExecutor();
        sum += CompletableFuture.supplyAsync(() -> compute(200), single).thenApplyAsync(x -> x + compute(201), single).get();
        single.shutdown();
        Lucce.mark(T.here("main-end"));
        System.out.println("sum " + sum);
    }
}
