//! A request frame body, as the connection hands it to the codec after `frame::check`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = skua::protocol::decode_request(bytes::Bytes::copy_from_slice(data));
});
