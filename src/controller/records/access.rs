//! The records of who may do what: SCRAM credentials (`UserScramCredentialRecord`,
//! `RemoveUserScramCredentialRecord`), ACLs (`AccessControlEntryRecord`; its removal is
//! an id alone, encoded beside the others) and client quotas (`ClientQuotaRecord`), all
//! version 0 and flexible, in Kafka's field order.

use super::wire::{Reader, WireError, Writer};
use super::{
    api_key, header, AccessControlEntryRecord, ClientQuotaRecord, MetadataRecord,
    UserScramCredential,
};

pub(super) fn decode_user_scram_credential(
    r: &mut Reader<'_>,
) -> Result<MetadataRecord, WireError> {
    let record = UserScramCredential {
        name: r.string()?,
        mechanism: r.i8()?,
        salt: r.compact_bytes()?,
        stored_key: r.compact_bytes()?,
        server_key: r.compact_bytes()?,
        iterations: r.i32()?,
    };
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::UserScramCredential(record))
}

pub(super) fn encode_user_scram_credential(w: &mut Writer, c: &UserScramCredential) {
    header(w, api_key::USER_SCRAM_CREDENTIAL, 0);
    w.string(&c.name);
    w.i8(c.mechanism);
    w.compact_bytes(&c.salt);
    w.compact_bytes(&c.stored_key);
    w.compact_bytes(&c.server_key);
    w.i32(c.iterations);
    w.no_tagged_fields();
}

pub(super) fn decode_remove_user_scram_credential(
    r: &mut Reader<'_>,
) -> Result<MetadataRecord, WireError> {
    let name = r.string()?;
    let mechanism = r.i8()?;
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::RemoveUserScramCredential { name, mechanism })
}

pub(super) fn encode_remove_user_scram_credential(w: &mut Writer, name: &str, mechanism: i8) {
    header(w, api_key::REMOVE_USER_SCRAM_CREDENTIAL, 0);
    w.string(name);
    w.i8(mechanism);
    w.no_tagged_fields();
}

pub(super) fn decode_access_control_entry(r: &mut Reader<'_>) -> Result<MetadataRecord, WireError> {
    let acl = AccessControlEntryRecord {
        id: r.uuid()?,
        resource_type: r.i8()?,
        resource_name: r.string()?,
        pattern_type: r.i8()?,
        principal: r.string()?,
        host: r.string()?,
        operation: r.i8()?,
        permission_type: r.i8()?,
    };
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::AccessControlEntry(acl))
}

pub(super) fn encode_access_control_entry(w: &mut Writer, acl: &AccessControlEntryRecord) {
    header(w, api_key::ACCESS_CONTROL_ENTRY, 0);
    w.uuid(acl.id);
    w.i8(acl.resource_type);
    w.string(&acl.resource_name);
    w.i8(acl.pattern_type);
    w.string(&acl.principal);
    w.string(&acl.host);
    w.i8(acl.operation);
    w.i8(acl.permission_type);
    w.no_tagged_fields();
}

pub(super) fn decode_remove_access_control_entry(
    r: &mut Reader<'_>,
) -> Result<MetadataRecord, WireError> {
    let id = r.uuid()?;
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::RemoveAccessControlEntry { id })
}

/// The entity is at most three (type, name) pairs: user, client id and IP.
pub(super) fn decode_client_quota(r: &mut Reader<'_>) -> Result<MetadataRecord, WireError> {
    let entity = r.array_of(3, |r| {
        let t = r.string()?;
        let n = r.nullable_string()?;
        r.skip_tagged_fields()?;
        Ok((t, n))
    })?;
    let key = r.string()?;
    let value = r.f64()?;
    let remove = r.bool()?;
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity,
        key,
        value,
        remove,
    }))
}

pub(super) fn encode_client_quota(w: &mut Writer, q: &ClientQuotaRecord) {
    header(w, api_key::CLIENT_QUOTA, 0);
    w.uvarint(q.entity.len() as u32 + 1);
    for (t, n) in &q.entity {
        w.string(t);
        w.nullable_string(n.as_deref());
        w.no_tagged_fields();
    }
    w.string(&q.key);
    w.f64(q.value);
    w.bool(q.remove);
    w.no_tagged_fields();
}
