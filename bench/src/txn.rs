//! The `txn` section (issue 10): what Kafka transactions (KIP-98) cost on the broker.
//! Throughput and broker CPU per GB of the produce section's acks=all 8-partition load,
//! sent plainly, idempotently and in transactions of `--txn-records` records per
//! producer; then end-to-end latency at `--latency-rate` with a transaction committed
//! every `--txn-commit-ms`, read by a read_committed consumer (and a read_uncommitted
//! one), beside the same paced load without transactions.
//!
//! `--check` guards none of its figures (on the shared two-core machine the transactional
//! throughput and the commit times swing 2–3× between identical runs); like every
//! section's, its `errors` and `lost` counts and a failure fail the check when above 0.
//! Each section run starts its own broker, so its CPU figures are its own.
//!
//! # Back-of-envelope, written before measuring
//!
//! - **Throughput.** A 100-record transaction of 1 KiB values (100 KiB, round-robin over
//!   8 partitions) adds to the plain produce: AddPartitionsToTxn for 8 partitions (one
//!   round trip, one `__transaction_state` append made durable: ~1–3 ms fsync), the
//!   records' own acks=all produce (one fsync, as without transactions, but of 100 KiB
//!   instead of a 1 MiB batch), and EndTxn (PrepareCommit made durable, then a commit
//!   marker on each of the 8 partitions and CompleteCommit: ~2 fsyncs on the path
//!   before the next transaction's partitions can be added). So ~3–4 fsyncs and ~4
//!   round trips per transaction per producer: 5–12 ms. Four producers overlap (group
//!   commit may share fsyncs): 350–800 transactions/s ≈ 35–80 MB/s, against ~285 MB/s
//!   for the same load without transactions.
//! - **Broker CPU per GB.** One GB is 10,000 transactions; each costs ~4 requests, 3
//!   coordinator log appends and 8 marker batches (each a small append, index and
//!   producer-state update, LSO move): ~50–150 µs of CPU, so +0.5–1.5 CPU-s/GB over the
//!   ~1.2 CPU-s/GB of plain acks=all produce; also smaller produce requests (100 KiB per
//!   producer between commits, not 1 MiB batches), so more per-request work per GB.
//!   Expect 2–3× the plain figure.
//! - **Latency, read_committed, commit every 100 ms at 5,000 records/s.** A record due at
//!   a uniform time in its 100 ms window becomes visible after the window ends and the
//!   commit completes: flush of the last records (~2–4 ms: produce + fsync), EndTxn
//!   (~2–4 ms), markers written and the LSO moved (~1–3 ms), then the fetch wakes. So
//!   p50 ≈ 50 + 8 ≈ 55–60 ms and p99 ≈ 99 + 8 ≈ 105–110 ms, against p50 4 / p99 7 ms
//!   without transactions. read_uncommitted sees records at the high watermark, like
//!   the plain run, except those due while `commit_transaction` blocks the producer
//!   (~5–10 % of each window): p50 ≈ 4–6 ms, p99 ≈ 10–15 ms.

use std::time::Duration;

use crate::kafka::{self, CommitTimes, Isolation, ProducerSettings, Transactions};
use crate::procfs::{Usage, UsageDelta};
use crate::report::{fmt, Report, Table};
use crate::{f, Bench, Phase, Res};

/// Partitions of the throughput topics (as the produce section's 8-partition scenarios).
const THROUGHPUT_PARTITIONS: i32 = 8;

impl Bench {
    /// Runs the section on one fresh broker: throughput first, then latency.
    pub(crate) fn txn(&mut self) -> Res<()> {
        let (target, _) = self.target()?;
        let bootstrap = target.bootstrap();
        let pid = target.pid();
        self.txn_throughput(&bootstrap, pid)?;
        self.txn_latency(&bootstrap, pid)?;
        self.report
            .metric("txn.peak_rss_mib", target.peak_rss_mib());
        println!("   broker peak RSS {} MiB", fmt(target.peak_rss_mib(), 1));
        Ok(())
    }

    fn txn_throughput(&mut self, bootstrap: &str, pid: Option<u32>) -> Res<()> {
        let records = self.records_for(self.sizes.txn_mib);
        let per_txn = self.opts.txn_records.max(1);
        let mut t = Table::new(
            format!(
                "transactional produce: {} MiB of {} B values per scenario, {} producers (acks=all, linger.ms 5, batch.size 1 MiB), round-robin over {THROUGHPUT_PARTITIONS} partitions",
                self.sizes.txn_mib, self.opts.value_bytes, self.opts.producers
            ),
            &["scenario", "MB/s", "records/s", "broker CPU-s/GB", "client CPU-s/GB", "broker cores", "client cores", "commits/s", "commit p50 ms", "commit p99 ms", "EndTxn p50 ms", "EndTxn p99 ms", "errors"],
        );
        let scenarios = throughput_scenarios(per_txn);
        let mut plain = None;
        for (name, label, settings) in scenarios {
            let topic = self.topic(&format!("txn-produce-{label}"));
            kafka::create_topic(&self.rt, bootstrap, &topic, THROUGHPUT_PARTITIONS)?;
            let (run, usage) = self.produce_measured(
                bootstrap,
                &topic,
                THROUGHPUT_PARTITIONS,
                &settings,
                records,
                pid,
            )?;
            let phase = Phase::new(run.records, run.bytes, usage.wall, &usage);
            let key = format!("txn.produce.{label}");
            phase.record(&mut self.report, &key);
            let r = &mut self.report;
            r.metric(format!("{key}.errors"), Some(f(run.errors)));
            let commits = !run.commits.total_micros.is_empty();
            let commits_s = run.commits.per_second(usage.wall);
            let c = commit_quantiles(&run.commits);
            if commits {
                r.metric(format!("{key}.commits_s"), Some(commits_s));
                record_commits(r, &key, c);
            }
            record_vs_plain(r, &key, &phase, &mut plain);
            let when = |value: f64, decimals| {
                if commits {
                    fmt(Some(value), decimals)
                } else {
                    "-".to_owned()
                }
            };
            t.row(
                [
                    vec![name],
                    phase.cells(),
                    vec![
                        when(commits_s, 0),
                        when(c[0], 2),
                        when(c[1], 2),
                        when(c[2], 2),
                        when(c[3], 2),
                        run.errors.to_string(),
                    ],
                ]
                .concat(),
            );
            println!(
                "   {}",
                t.render().lines().last().unwrap_or_default().trim()
            );
        }
        self.report.table(&t);
        Ok(())
    }

    fn txn_latency(&mut self, bootstrap: &str, pid: Option<u32>) -> Res<()> {
        let rate = self.opts.latency_rate;
        let every = Duration::from_millis(self.opts.txn_commit_ms.max(1));
        let mut t = self.txn_latency_table(rate);
        let runs = latency_runs(every);
        for (producer, label, settings, isolation) in runs {
            let topic = self.topic(&format!("txn-latency-{label}-{}", isolation.name()));
            kafka::create_topic(&self.rt, bootstrap, &topic, 1)?;
            let start = Usage::sample(pid);
            let run = kafka::latency_run(
                bootstrap,
                &topic,
                1,
                &settings,
                Some(isolation),
                rate,
                self.sizes.latency_secs,
                self.sizes.latency_warmup,
                self.opts.value_bytes,
            )?;
            let usage = start.since(pid);
            let key = format!("txn.latency.{label}_{}", isolation.name());
            let (p50, p99, p999, max) = (
                run.quantile_ms(0.5),
                run.quantile_ms(0.99),
                run.quantile_ms(0.999),
                run.quantile_ms(1.0),
            );
            let commits = !run.commits.total_micros.is_empty();
            let c = commit_quantiles(&run.commits);
            let r = &mut self.report;
            r.metric(format!("{key}.p50_ms"), Some(p50));
            r.metric(format!("{key}.p99_ms"), Some(p99));
            r.metric(format!("{key}.p999_ms"), Some(p999));
            r.metric(format!("{key}.max_ms"), Some(max));
            r.metric(format!("{key}.lost"), Some(f(run.lost)));
            r.metric(
                format!("{key}.broker_cores"),
                usage.broker_cpu.map(|c| c / usage.wall),
            );
            if commits {
                record_commits(r, &key, c);
            }
            let quantiles = [p50, p99, p999, max];
            t.row(latency_row(
                producer,
                isolation,
                &run,
                &usage,
                quantiles,
                commits.then_some(c),
            ));
            println!(
                "   {}",
                t.render().lines().last().unwrap_or_default().trim()
            );
        }
        self.report.table(&t);
        Ok(())
    }

    /// The transactional latency table's header.
    fn txn_latency_table(&self, rate: u32) -> Table {
        Table::new(
            format!(
                "end-to-end latency with transactions: {rate} records/s of {} B for {} s (first {} s not counted), 1 partition, one producer (acks=all, linger.ms 5), one consumer; due time in the payload",
                self.opts.value_bytes, self.sizes.latency_secs, self.sizes.latency_warmup
            ),
            &["producer", "consumer", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "samples", "lost", "commit p50 ms", "commit p99 ms", "EndTxn p50 ms", "EndTxn p99 ms", "broker cores", "client cores"],
        )
    }
}

/// The transactional produce scenarios: plain, idempotent, and transactions of
/// `per_txn` records, each with its table name and metric label.
fn throughput_scenarios(per_txn: u64) -> [(String, &'static str, ProducerSettings); 3] {
    let tuned = ProducerSettings::tuned("all");
    [
        ("no transactions".to_owned(), "plain", tuned.clone()),
        (
            "idempotent, no transactions".to_owned(),
            "idempotent",
            ProducerSettings {
                idempotent: true,
                ..tuned.clone()
            },
        ),
        (
            format!("transactions of {per_txn} records"),
            "transactional",
            ProducerSettings {
                transactions: Some(Transactions::EveryRecords(per_txn)),
                ..tuned
            },
        ),
    ]
}

/// The transactional latency runs: plain (read_uncommitted), then transactions
/// committed every `every` read with read_committed and with read_uncommitted.
fn latency_runs(every: Duration) -> [(String, &'static str, ProducerSettings, Isolation); 3] {
    let plain = ProducerSettings::default_with("all");
    let transactional = ProducerSettings {
        transactions: Some(Transactions::Every(every)),
        ..plain.clone()
    };
    let commit_every = format!("commit every {} ms", every.as_millis());
    [
        (
            "no transactions".to_owned(),
            "plain",
            plain,
            Isolation::ReadUncommitted,
        ),
        (
            commit_every.clone(),
            "transactional",
            transactional.clone(),
            Isolation::ReadCommitted,
        ),
        (
            commit_every,
            "transactional",
            transactional,
            Isolation::ReadUncommitted,
        ),
    ]
}

/// The first scenario (plain) is the reference: later ones record their MB/s and broker
/// CPU per GB against it.
fn record_vs_plain(
    r: &mut Report,
    key: &str,
    phase: &Phase,
    plain: &mut Option<(f64, Option<f64>)>,
) {
    match &plain {
        None => *plain = Some((phase.mb_s, phase.broker_cpu_per_gb)),
        Some((plain_mb_s, plain_cpu)) => {
            r.metric(
                format!("{key}.mb_s_vs_plain"),
                Some(phase.mb_s / plain_mb_s),
            );
            r.metric(
                format!("{key}.broker_cpu_s_per_gb_vs_plain"),
                phase.broker_cpu_per_gb.zip(*plain_cpu).map(|(c, p)| c / p),
            );
        }
    }
}

/// One transactional latency run's row: its end-to-end quantiles (p50, p99, p99.9,
/// max), samples and losses, its commit and EndTxn quantiles (`-` without
/// transactions) and the cores used.
fn latency_row(
    producer: String,
    isolation: Isolation,
    run: &kafka::LatencyRun,
    usage: &UsageDelta,
    [p50, p99, p999, max]: [f64; 4],
    commits: Option<[f64; 4]>,
) -> Vec<String> {
    let when = |i: usize| commits.map_or_else(|| "-".to_owned(), |c| fmt(Some(c[i]), 2));
    vec![
        producer,
        isolation.name().to_owned(),
        fmt(Some(p50), 2),
        fmt(Some(p99), 2),
        fmt(Some(p999), 2),
        fmt(Some(max), 2),
        run.micros.len().to_string(),
        run.lost.to_string(),
        when(0),
        when(1),
        when(2),
        when(3),
        fmt(usage.broker_cpu.map(|c| c / usage.wall), 3),
        fmt(usage.client_cpu.map(|c| c / usage.wall), 3),
    ]
}

/// Commit p50 and p99, then EndTxn p50 and p99, in milliseconds.
fn commit_quantiles(commits: &CommitTimes) -> [f64; 4] {
    [
        kafka::quantile_ms(&commits.total_micros, 0.5),
        kafka::quantile_ms(&commits.total_micros, 0.99),
        kafka::quantile_ms(&commits.end_txn_micros, 0.5),
        kafka::quantile_ms(&commits.end_txn_micros, 0.99),
    ]
}

fn record_commits(report: &mut Report, key: &str, [p50, p99, end_p50, end_p99]: [f64; 4]) {
    report.metric(format!("{key}.commit_p50_ms"), Some(p50));
    report.metric(format!("{key}.commit_p99_ms"), Some(p99));
    report.metric(format!("{key}.end_txn_p50_ms"), Some(end_p50));
    report.metric(format!("{key}.end_txn_p99_ms"), Some(end_p99));
}
