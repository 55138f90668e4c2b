//! ACLs in the metadata log (Kafka's `AclControlManager`): CreateAcls writes an
//! `AccessControlEntryRecord` under a fresh id for each new binding (an identical one
//! already stored succeeds without a record), DeleteAcls a `RemoveAccessControlEntryRecord`
//! for every stored ACL a filter matches. Each request is one batch, so a DeleteAcls with
//! several filters removes all or nothing.

use std::collections::BTreeSet;

use logbook_metadata::acls::{AclBinding, AclBindingFilter};
use logbook_metadata::{
    AccessControlEntryRecord, MetadataImage, MetadataRecord, RemoveAccessControlEntryRecord,
};
use uuid::Uuid;

use super::{QuorumController, QuorumError};

/// The most records one ACL request may write (Kafka's `MAX_RECORDS_PER_USER_OP`).
const MAX_RECORDS_PER_USER_OP: usize = 10_000;

impl QuorumController {
    /// CreateAcls: each binding's result in request order.
    ///
    /// # Errors
    /// `NotController`, `Raft` for the request; per binding `InvalidRequest` with Kafka's
    /// message when [`AclBinding::validate`] refuses it.
    pub async fn create_acls(
        &self,
        bindings: Vec<AclBinding>,
    ) -> Result<Vec<Result<(), QuorumError>>, QuorumError> {
        let _active = self.activate().await?;
        let (results, _) = self
            .run(|image| Ok(create_records(image, &bindings)))
            .await?;
        Ok(results)
    }

    /// DeleteAcls: per filter, the bindings it removed, in request order.
    ///
    /// # Errors
    /// `NotController`, `Raft` for the request; per filter `InvalidRequest` for a filter
    /// with an UNKNOWN element.
    pub async fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Result<Vec<AclBinding>, QuorumError>>, QuorumError> {
        let _active = self.activate().await?;
        let (results, _) = self.run(|image| delete_records(image, &filters)).await?;
        Ok(results)
    }
}

type Created = (Vec<MetadataRecord>, Vec<Result<(), QuorumError>>);

fn create_records(image: &MetadataImage, bindings: &[AclBinding]) -> Created {
    let mut records = Vec::new();
    let mut added: BTreeSet<&AclBinding> = BTreeSet::new();
    let mut ids: BTreeSet<Uuid> = BTreeSet::new();
    let results = bindings
        .iter()
        .map(|binding| {
            binding.validate().map_err(QuorumError::InvalidRequest)?;
            if image.acls().contains(binding) || !added.insert(binding) {
                return Ok(());
            }
            if records.len() >= MAX_RECORDS_PER_USER_OP {
                return Err(QuorumError::InvalidRequest(format!(
                    "Cannot create more than {MAX_RECORDS_PER_USER_OP} acls in a single request."
                )));
            }
            let id = loop {
                let id = Uuid::new_v4();
                if !image.acls().contains_id(&id) && ids.insert(id) {
                    break id;
                }
            };
            records.push(MetadataRecord::AccessControlEntry(
                AccessControlEntryRecord {
                    id,
                    binding: binding.clone(),
                },
            ));
            Ok(())
        })
        .collect();
    (records, results)
}

type Deleted = (
    Vec<MetadataRecord>,
    Vec<Result<Vec<AclBinding>, QuorumError>>,
);

fn delete_records(
    image: &MetadataImage,
    filters: &[AclBindingFilter],
) -> Result<Deleted, QuorumError> {
    let mut removed: BTreeSet<Uuid> = BTreeSet::new();
    let mut results = Vec::with_capacity(filters.len());
    for filter in filters {
        if let Err(message) = filter.validate() {
            results.push(Err(QuorumError::InvalidRequest(message)));
            continue;
        }
        let mut deleted = Vec::new();
        for acl in image
            .acls()
            .iter()
            .filter(|acl| filter.matches(&acl.binding))
        {
            deleted.push(acl.binding.clone());
            removed.insert(acl.id);
        }
        if removed.len() > MAX_RECORDS_PER_USER_OP {
            return Err(QuorumError::InvalidRequest(format!(
                "Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation."
            )));
        }
        results.push(Ok(deleted));
    }
    let records = removed
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord { id }))
        .collect();
    Ok((records, results))
}
