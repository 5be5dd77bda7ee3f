//! Encoder micro benchmarks: steady-state update (1 and 2 threads) and the slow path (a new edge,
//! logged to a real store). `cargo bench --bench encoder`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use lucce_encoder::{Context, Encoder, EncoderConfig, MethodMeta, SiteId, SiteKind, SiteMeta};
use lucce_log_format::{StoreWriter, WriterOptions};

fn meta(name: &str) -> MethodMeta {
    MethodMeta { class: "bench.B".into(), name: name.into(), descriptor: "()V".into(), source_file: Some("B.java".into()), access_flags: 0 }
}

fn site(enc: &Encoder<impl lucce_encoder::GraphSink>, m: lucce_encoder::MethodId) -> SiteId {
    enc.register_site(SiteMeta { method: m, kind: SiteKind::Call, bci: 0, line: 1 }).unwrap()
}

fn steady_state(c: &mut Criterion) {
    let enc = Encoder::new(EncoderConfig::default(), ());
    let (p, n) = (enc.register_method(meta("p")), enc.register_method(meta("n")));
    let ctx = enc.enter_thread(p).unwrap();
    let sites: Vec<SiteId> = (0..2).map(|_| site(&enc, p)).collect();
    for s in &sites {
        enc.enter(*s, ctx, n).unwrap();
    }
    c.bench_function("enter/steady/1 thread", |b| b.iter(|| enc.enter(black_box(sites[0]), black_box(ctx), black_box(n)).unwrap()));
    c.bench_function("enter/steady/2 threads (per update)", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            std::thread::scope(|s| {
                for site in &sites {
                    let enc = &enc;
                    s.spawn(move || {
                        for _ in 0..iters {
                            black_box(enc.enter(black_box(*site), black_box(ctx), black_box(n)).unwrap());
                        }
                    });
                }
            });
            start.elapsed()
        })
    });
}

fn slow_path(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let writer = StoreWriter::create(&dir.path().join("s"), WriterOptions::default()).unwrap();
    let enc = Encoder::new(EncoderConfig::default(), writer.handle());
    let p = enc.register_method(meta("p"));
    let ctx: Context = enc.enter_thread(p).unwrap();
    let s = site(&enc, p);
    c.bench_function("enter/new edge, logged to a store", |b| {
        b.iter_custom(|iters| {
            let callees: Vec<_> = (0..iters).map(|i| enc.register_method(meta(&format!("n{i}")))).collect();
            let start = Instant::now();
            for n in callees {
                black_box(enc.enter(s, ctx, n).unwrap());
            }
            start.elapsed()
        })
    });
    drop(enc);
    writer.close().unwrap();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = steady_state, slow_path
}
criterion_main!(benches);
