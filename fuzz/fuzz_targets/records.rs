#![no_main]
use libfuzzer_sys::fuzz_target;
use lucce_log_format::records::decode_block;
use lucce_log_format::{EventRecord, GraphRecord, MethodRecord, SiteRecord};

fuzz_target!(|data: &[u8]| {
    let _ = decode_block::<EventRecord>(data);
    let _ = decode_block::<GraphRecord>(data);
    let _ = decode_block::<MethodRecord>(data);
    let _ = decode_block::<SiteRecord>(data);
});
