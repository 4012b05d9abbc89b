//! A record value or a whole record batch of the KRaft metadata log
//! (`__cluster_metadata-0`, its segments and snapshots) as read back at startup.
#![no_main]

use libfuzzer_sys::fuzz_target;

use skua::controller::image::MetadataImage;
use skua::controller::records::batch::records_of;
use skua::controller::records::MetadataRecord;

fn replay(value: &[u8]) {
    if let Ok(record) = MetadataRecord::decode(value) {
        let _ = MetadataImage::default().replay(&record);
    }
}

fuzz_target!(|data: &[u8]| {
    replay(data);
    if let Ok((_, records)) = records_of(data) {
        assert!(records.len() <= data.len());
        for r in records {
            if let Some(v) = r.value {
                replay(v);
            }
        }
    }
});
