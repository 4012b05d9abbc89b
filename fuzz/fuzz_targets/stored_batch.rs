//! Record batches as read back from a segment: every whole batch of the input through the
//! bounded record reader (`skua::log::records`), as ListOffsets and the group coordinator's
//! loader read them. Whatever the bytes, records come out with offsets inside the batch's
//! range, at most as many as it declares, or an error; never a panic or an allocation
//! sized by a declared length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skua::log::records;

fuzz_target!(|data: &[u8]| {
    for (header, batch) in records::whole_batches(data) {
        let Ok(reader) = records::records(batch) else {
            continue;
        };
        let mut n = 0i64;
        for record in reader {
            let Ok(record) = record else { break };
            n += 1;
            assert!(n <= i64::from(header.records_count()));
            assert!((header.base_offset()..=header.last_offset()).contains(&record.offset));
        }
    }
});
