/*
 * The Quartz 2.3 side of benchmarks/bench_dispatch.py: N no-op jobs due at the same whole
 * second T, on a RAMJobStore and a SimpleThreadPool of W threads; prints one line
 * `RESULT {json}` with the keys the Python sides emit, then exits.
 *
 *     java -cp quartz2.jar:slf4j-api.jar:slf4j-nop.jar:DIR QuartzBurst N W LEAD [BATCH [WARMUP]]
 *
 * LEAD: T is a whole second at least LEAD seconds after the warm-up (like _slot_after).
 * BATCH: org.quartz.scheduler.batchTriggerAcquisitionMaxCount (default 1, Quartz's own).
 * WARMUP: jobs in a warm-up burst run (and discarded) before T is fixed (default 0).
 *
 * Lateness = Instant.now() (wall clock, microseconds) at the start of execute() - T,
 * the same wall-clock difference the Python sides take with datetime.now(UTC).
 * Compiled by the Python driver into a temporary folder; never commit a .class.
 */

import java.time.Instant;
import java.util.Arrays;
import java.util.Date;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.quartz.Job;
import org.quartz.JobBuilder;
import org.quartz.JobDetail;
import org.quartz.JobExecutionContext;
import org.quartz.Scheduler;
import org.quartz.SimpleScheduleBuilder;
import org.quartz.Trigger;
import org.quartz.TriggerBuilder;
import org.quartz.impl.StdSchedulerFactory;

public final class QuartzBurst {

    /** One burst: its slot and what its jobs record (a fixed array filled by an atomic index). */
    static final class Burst {
        final long slotMs;
        final long[] lateUs;
        final AtomicInteger recorded = new AtomicInteger();
        final AtomicInteger missed = new AtomicInteger();
        final CountDownLatch done = new CountDownLatch(1);

        Burst(long slotMs, int n) {
            this.slotMs = slotMs;
            this.lateUs = new long[n];
        }
    }

    /** The burst the jobs record into: the warm-up one, then the measured one. */
    static volatile Burst current;

    /** The no-op job: records its lateness, nothing else. */
    public static final class Noop implements Job {
        @Override
        public void execute(JobExecutionContext context) {
            Instant now = Instant.now();
            Burst b = current;
            long us = now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
            // A misfired trigger (none expected, see misfireThreshold) fires with a new time.
            if (context.getScheduledFireTime().getTime() != b.slotMs) {
                b.missed.incrementAndGet();
            }
            int i = b.recorded.getAndIncrement();
            b.lateUs[i] = us - b.slotMs * 1000;
            if (i == b.lateUs.length - 1) {
                b.done.countDown();
            }
        }
    }

    static long slotAfterMs(double seconds) {
        long at = System.currentTimeMillis() + Math.round(seconds * 1000);
        return at / 1000 * 1000 + 1000;
    }

    static Scheduler scheduler(int workers, int batch) throws Exception {
        Properties p = new Properties();
        p.setProperty("org.quartz.scheduler.instanceName", "QuartzBurst");
        p.setProperty("org.quartz.scheduler.rmi.export", "false");
        p.setProperty("org.quartz.scheduler.skipUpdateCheck", "true");
        p.setProperty("org.quartz.threadPool.class", "org.quartz.simpl.SimpleThreadPool");
        p.setProperty("org.quartz.threadPool.threadCount", Integer.toString(workers));
        p.setProperty("org.quartz.threadPool.makeThreadsDaemons", "true");
        p.setProperty("org.quartz.jobStore.class", "org.quartz.simpl.RAMJobStore");
        // One hour, like raw APScheduler's misfire_grace_time=3600: nothing is late enough
        // to misfire, so every run is a normal fire and lateness is the scheduler's own.
        p.setProperty("org.quartz.jobStore.misfireThreshold", "3600000");
        // Quartz's default is 1: the scheduler thread acquires one trigger per pass, then
        // fires it and goes round again. With a batch it acquires up to
        // min(free worker threads, batch) triggers per pass, so any value >= W acts as W.
        // The driver measures both 1 and W and reports the better one.
        p.setProperty(
                "org.quartz.scheduler.batchTriggerAcquisitionMaxCount", Integer.toString(batch));
        return new StdSchedulerFactory(p).getScheduler();
    }

    /** Schedules n one-shot jobs at slotMs (bulk, like the Python sides' job lists). */
    static void schedule(Scheduler s, String group, int n, long slotMs) throws Exception {
        Date at = new Date(slotMs);
        for (int i = 0; i < n; i++) {
            JobDetail job =
                    JobBuilder.newJob(Noop.class).withIdentity(String.format("j%06d", i), group)
                            .build();
            Trigger trigger =
                    TriggerBuilder.newTrigger().withIdentity(String.format("t%06d", i), group)
                            .startAt(at)
                            .withSchedule(SimpleScheduleBuilder.simpleSchedule()
                                    .withMisfireHandlingInstructionFireNow())
                            .build();
            s.scheduleJob(job, trigger);
        }
    }

    /** Nearest-rank percentile, the same arithmetic as _common.percentile (round half even). */
    static double percentile(long[] sortedUs, int count, double q) {
        if (count == 0) {
            return Double.NaN;
        }
        int rank = (int) Math.max(0, Math.min(count - 1, Math.rint(q / 100 * count + 0.5) - 1));
        return sortedUs[rank] / 1e6;
    }

    static String num(double x) {
        return Double.isNaN(x) ? "NaN" : String.format(Locale.ROOT, "%.6f", x);
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        int workers = Integer.parseInt(args[1]);
        double lead = Double.parseDouble(args[2]);
        int batch = args.length > 3 ? Integer.parseInt(args[3]) : 1;
        int warmup = args.length > 4 ? Integer.parseInt(args[4]) : 0;

        long t0 = System.nanoTime();
        Scheduler s = scheduler(workers, batch);
        s.start();
        double startS = (System.nanoTime() - t0) / 1e9;

        // Warm-up: the same scheduler, job class and code paths on a burst of its own, so
        // the measured burst runs JIT-compiled code with its classes loaded, as a long-running
        // scheduler would. Its jobs are gone (fired once, non-durable) before T is fixed.
        long w0 = System.nanoTime();
        if (warmup > 0) {
            Burst w = new Burst(slotAfterMs(0.5), warmup);
            current = w;
            schedule(s, "warmup", warmup, w.slotMs);
            if (!w.done.await(120, TimeUnit.SECONDS)) {
                throw new IllegalStateException("warm-up burst did not finish");
            }
            Thread.sleep(200); // let the workers return from their last warm-up jobs
            System.gc(); // drop the warm-up's own garbage; the measured burst starts clean
        }
        double warmupS = (System.nanoTime() - w0) / 1e9;

        // The measured burst: the slot is fixed before the jobs are added, like the Python sides.
        long r0 = System.nanoTime();
        Burst b = new Burst(slotAfterMs(lead), n);
        current = b;
        schedule(s, "burst", n, b.slotMs);
        double readyS = startS + (System.nanoTime() - r0) / 1e9;
        double margin = (b.slotMs - System.currentTimeMillis()) / 1000.0;
        if (margin < 0.2) {
            System.err.printf(Locale.ROOT, "slot passed before the scheduler was ready (margin %.2fs)%n", margin);
            System.exit(2);
        }
        boolean finished = b.done.await((long) (lead + 300), TimeUnit.SECONDS);
        Instant end = Instant.now();
        double burst = (end.getEpochSecond() * 1e6 + end.getNano() / 1000 - b.slotMs * 1000) / 1e6;
        s.shutdown(false);

        int count = Math.min(b.recorded.get(), n);
        long[] sorted = Arrays.copyOf(b.lateUs, count);
        Arrays.sort(sorted);
        String lateness = String.format(Locale.ROOT,
                "{\"n\": %d, \"p50\": %s, \"p99\": %s, \"max\": %s}", count,
                num(percentile(sorted, count, 50)), num(percentile(sorted, count, 99)),
                num(count > 0 ? sorted[count - 1] / 1e6 : Double.NaN));
        // stall_s: Quartz has no event loop to stall; NaN (json.loads reads it as nan).
        System.out.println("RESULT " + String.format(Locale.ROOT,
                "{\"side\": \"quartz\", \"n\": %d, \"workers\": %d, \"batch\": %d, \"warmup\": %d,"
                        + " \"ready_s\": %s, \"warmup_s\": %s, \"margin_s\": %s, \"stall_s\": NaN,"
                        + " \"stall_after_slot_s\": NaN, \"burst_s\": %s, \"lateness\": %s,"
                        + " \"rate\": %s, \"finished\": %d, \"not_started\": 0, \"missed\": %d,"
                        + " \"failed\": 0, \"timed_out\": %s}",
                n, workers, batch, warmup, num(readyS), num(warmupS), num(margin), num(burst),
                lateness, num(count / burst), count, b.missed.get() + (n - count),
                finished ? "false" : "true"));
        System.out.flush();
        System.exit(0);
    }
}
