//! A record of `__consumer_offsets` (key and value of any type), through the decoder the
//! group coordinator loads with. Input: a u16 key length, the key, then the value (an
//! empty value is a tombstone). What decodes must re-encode to the same record.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use skua::coordinator::group::records::{decode_record, encode_record};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let key_len = u16::from_be_bytes([data[0], data[1]]) as usize;
    let rest = &data[2..];
    let (key, value) = rest.split_at(key_len.min(rest.len()));
    let key = Bytes::copy_from_slice(key);
    let value = (!value.is_empty()).then(|| Bytes::copy_from_slice(value));
    if let Ok(Some(record)) = decode_record(Some(&key), value.as_ref()) {
        let (k, v) = encode_record(&record);
        let again = decode_record(Some(&k), v.as_ref()).expect("a re-encoded record decodes");
        assert_eq!(again, Some(record));
    }
});
