//! SCRAM credentials in the metadata log (Kafka's `ScramControlManager`): the
//! AlterUserScramCredentials operation writes `UserScramCredentialRecord` and
//! `RemoveUserScramCredentialRecord`. The broker derives each credential's stored and
//! server keys from the salted password the client sent (so this crate needs no
//! cryptography) and checks what needs no image (mechanism, iteration bounds, a user
//! named twice); the controller checks a deletion against its image, which only it
//! knows authoritatively.

use logbook_metadata::{
    MetadataImage, MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord,
};
use serde::{Deserialize, Serialize};

use super::{QuorumController, QuorumError};

/// Kafka's RESOURCE_NOT_FOUND.
const RESOURCE_NOT_FOUND: i16 = 91;

/// One change of AlterUserScramCredentials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScramChange {
    /// Remove `name`'s credential of mechanism code `mechanism`.
    Delete {
        /// The user.
        name: String,
        /// Kafka's mechanism code.
        mechanism: i8,
    },
    /// Add or replace a credential.
    Upsert(UserScramCredentialRecord),
}

impl ScramChange {
    /// The user changed.
    #[must_use]
    pub fn user(&self) -> &str {
        match self {
            ScramChange::Delete { name, .. } => name,
            ScramChange::Upsert(r) => &r.name,
        }
    }
}

impl QuorumController {
    /// AlterUserScramCredentials: every change that applies is committed in one batch;
    /// the result of each change is in request order.
    ///
    /// # Errors
    /// `NotController`, `Raft` for the request; per change `ScramCredential` with
    /// RESOURCE_NOT_FOUND for a deletion of a credential that does not exist.
    pub async fn alter_user_scram_credentials(
        &self,
        changes: Vec<ScramChange>,
    ) -> Result<Vec<Result<(), QuorumError>>, QuorumError> {
        let _active = self.activate().await?;
        let (results, _) = self
            .run(|image| {
                let mut records = Vec::new();
                let results = changes
                    .iter()
                    .map(|change| change_records(image, change).map(|r| records.push(r)))
                    .collect();
                Ok((records, results))
            })
            .await?;
        Ok(results)
    }
}

fn change_records(
    image: &MetadataImage,
    change: &ScramChange,
) -> Result<MetadataRecord, QuorumError> {
    match change {
        ScramChange::Delete { name, mechanism } => {
            if image.scram_credential(name, *mechanism).is_none() {
                return Err(QuorumError::ScramCredential {
                    code: RESOURCE_NOT_FOUND,
                    message: "Attempt to delete a user credential that does not exist".to_string(),
                });
            }
            Ok(MetadataRecord::RemoveUserScramCredential(
                RemoveUserScramCredentialRecord {
                    name: name.clone(),
                    mechanism: *mechanism,
                },
            ))
        }
        ScramChange::Upsert(record) => Ok(MetadataRecord::UserScramCredential(record.clone())),
    }
}
