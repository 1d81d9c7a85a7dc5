//! The credential store: records put, read, listed (never with their secret bytes), touched and
//! deleted with exact values; two instances racing a compare-and-swap on one record, exactly one
//! winning each round; sealed records refused under a missing key or when moved to another
//! principal; rotation re-sealing every record so the old key can go; and the database at rest
//! holding neither a secret's bytes nor their base64 or hex.

use crate::*;
use purra_core::vault::{rotate, sealed_key_id, Keyring, Rotation, Secret, VaultError};
use purra_core::{
    CredentialFilter, CredentialKey, CredentialKind, CredentialMeta, CredentialStore,
    CredentialWrite, SealedSecret,
};
use std::sync::Arc;

fn key(principal: &str, upstream: &str, name: &str) -> CredentialKey {
    CredentialKey::new(principal, upstream, name)
}

fn write(sealed: &[u8], t: u64) -> CredentialWrite {
    CredentialWrite {
        kind: CredentialKind::Secret,
        sealed: SealedSecret(sealed.to_vec()),
        meta: CredentialMeta::default(),
        at: at(t),
    }
}

fn keyring(ids: &[&str]) -> (Keyring, Vec<String>) {
    let lines: Vec<String> = ids
        .iter()
        .map(|id| Keyring::new_key_line(id).unwrap().to_string())
        .collect();
    (Keyring::parse(&lines.join("\n")).unwrap(), lines)
}

/// A key file of `lines` (some of [`keyring`]'s) in the given order.
fn ring_of(lines: &[&String]) -> Keyring {
    let text: Vec<&str> = lines.iter().map(|l| l.as_str()).collect();
    Keyring::parse(&text.join("\n")).unwrap()
}

/// Seals `secret` for `k` (a `secret`) and stores it.
async fn seal_and_put<S: CredentialStore>(
    store: &S,
    ring: &Keyring,
    k: &CredentialKey,
    secret: &str,
) -> u64 {
    let sealed = ring
        .seal(k, CredentialKind::Secret, &Secret::from(secret.to_owned()))
        .unwrap();
    store
        .put_credential(
            k.clone(),
            CredentialWrite {
                kind: CredentialKind::Secret,
                sealed,
                meta: CredentialMeta::default(),
                at: at(1),
            },
        )
        .await
        .unwrap()
}

/// Opens the record at `k` with `ring`.
async fn open_of<S: CredentialStore>(
    store: &S,
    ring: &Keyring,
    k: &CredentialKey,
) -> Result<Secret, VaultError> {
    let record = store.credential(k.clone()).await.unwrap().unwrap();
    ring.open(k, record.info.kind, &record.sealed)
}

/// Contract test.
pub async fn credentials_are_put_read_listed_touched_and_deleted<H: Harness>(h: &H) {
    let location = h.fresh("cred-crud");
    let store = h.open(&location).await.unwrap();
    let alice_gh = key("alice", "github", "token");
    assert_eq!(store.credential(alice_gh.clone()).await, Ok(None));
    let meta = CredentialMeta {
        issuer: Some("https://as.example".into()),
        scopes: Some("repo read:org".into()),
        subject: Some("alice-sub".into()),
        expires_at: Some(at(3600)),
    };
    let oauth = CredentialWrite {
        kind: CredentialKind::OAuth,
        sealed: SealedSecret(vec![1, 2, 3]),
        meta: meta.clone(),
        at: at(100),
    };
    assert_eq!(store.put_credential(alice_gh.clone(), oauth).await, Ok(1));
    let record = store.credential(alice_gh.clone()).await.unwrap().unwrap();
    assert_eq!(record.sealed, SealedSecret(vec![1, 2, 3]));
    assert_eq!(record.info.key, alice_gh);
    assert_eq!(record.info.kind, CredentialKind::OAuth);
    assert_eq!(record.info.meta, meta);
    assert_eq!(
        (record.info.created_at, record.info.updated_at),
        (at(100), at(100))
    );
    assert_eq!((record.info.last_used_at, record.info.version), (None, 1));

    // A put on an existing record replaces it: created_at kept, version one more.
    assert_eq!(
        store
            .put_credential(alice_gh.clone(), write(&[4, 5], 200))
            .await,
        Ok(2)
    );
    let record = store.credential(alice_gh.clone()).await.unwrap().unwrap();
    assert_eq!(record.sealed, SealedSecret(vec![4, 5]));
    assert_eq!(record.info.kind, CredentialKind::Secret);
    assert_eq!(record.info.meta, CredentialMeta::default());
    assert_eq!(
        (
            record.info.created_at,
            record.info.updated_at,
            record.info.version
        ),
        (at(100), at(200), 2)
    );

    // A use is recorded without a new version (it never makes a refresh lose its race).
    assert_eq!(
        store.touch_credential(alice_gh.clone(), at(300)).await,
        Ok(true)
    );
    assert_eq!(
        store.touch_credential(alice_gh.clone(), at(250)).await,
        Ok(true)
    );
    let info = store
        .credential(alice_gh.clone())
        .await
        .unwrap()
        .unwrap()
        .info;
    assert_eq!((info.last_used_at, info.version), (Some(at(300)), 2));
    assert_eq!(
        store
            .touch_credential(key("nobody", "github", "token"), at(1))
            .await,
        Ok(false)
    );

    for k in [
        key("alice", "linear", "oauth"),
        key("bob", "github", "token"),
        key("bob", "github", "app"),
    ] {
        assert_eq!(store.put_credential(k, write(&[9], 400)).await, Ok(1));
    }
    let keys = |infos: Vec<purra_core::CredentialInfo>| -> Vec<String> {
        infos.into_iter().map(|i| i.key.to_string()).collect()
    };
    let all = store
        .credentials(CredentialFilter::default())
        .await
        .unwrap();
    assert_eq!(
        keys(all),
        [
            "alice/github/token",
            "alice/linear/oauth",
            "bob/github/app",
            "bob/github/token"
        ]
    );
    let filter = |p: Option<&str>, u: Option<&str>| CredentialFilter {
        principal: p.map(str::to_owned),
        upstream: u.map(str::to_owned),
    };
    assert_eq!(
        keys(
            store
                .credentials(filter(Some("alice"), None))
                .await
                .unwrap()
        ),
        ["alice/github/token", "alice/linear/oauth"]
    );
    assert_eq!(
        keys(
            store
                .credentials(filter(None, Some("github")))
                .await
                .unwrap()
        ),
        ["alice/github/token", "bob/github/app", "bob/github/token"]
    );
    assert_eq!(
        keys(
            store
                .credentials(filter(Some("bob"), Some("linear")))
                .await
                .unwrap()
        ),
        Vec::<String>::new()
    );

    // Bad input is refused and changes nothing.
    let long = "x".repeat(purra_core::credential::MAX_KEY_PART + 1);
    assert!(matches!(
        store
            .put_credential(key(&long, "github", "t"), write(&[1], 1))
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .put_credential(key("carol", "github", "t"), write(&[], 1))
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store
            .credentials(CredentialFilter::default())
            .await
            .unwrap()
            .len(),
        4
    );

    // Delete (revoke): gone, and a second delete finds nothing.
    assert_eq!(store.delete_credential(alice_gh.clone()).await, Ok(true));
    assert_eq!(store.delete_credential(alice_gh.clone()).await, Ok(false));
    assert_eq!(store.credential(alice_gh.clone()).await, Ok(None));
    // A record put again after a delete starts over at version 1.
    assert_eq!(
        store
            .put_credential(alice_gh.clone(), write(&[7], 500))
            .await,
        Ok(1)
    );

    // Kept across reopening.
    drop(store);
    let again = h.open(&location).await.unwrap();
    let info = again.credential(alice_gh).await.unwrap().unwrap();
    assert_eq!((info.sealed, info.info.version), (SealedSecret(vec![7]), 1));
    assert_eq!(
        again
            .credentials(CredentialFilter::default())
            .await
            .unwrap()
            .len(),
        4
    );
}

/// Contract test: two instances refresh the same connection at once, 100 rounds. Each round both
/// read the record, both replace it naming the version they read: exactly one wins.
pub async fn racing_replacements_of_one_credential_are_won_exactly_once_each_round<H: Harness>(
    h: &H,
) {
    const ROUNDS: usize = 100;
    let location = h.fresh("cred-cas");
    let a = h.open(&location).await.unwrap();
    let b = h.open(&location).await.unwrap();
    let k = key("alice", "linear", "oauth");
    assert_eq!(
        a.put_credential(k.clone(), write(b"initial", 1)).await,
        Ok(1)
    );
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let racer = |store: H::Store, me: char| {
        let (barrier, k) = (Arc::clone(&barrier), k.clone());
        tokio::spawn(async move {
            let mut won = Vec::with_capacity(ROUNDS);
            for round in 0..ROUNDS {
                barrier.wait().await;
                let read = store.credential(k.clone()).await.unwrap().unwrap();
                // Both have read before either writes: they race on the same version.
                barrier.wait().await;
                let sealed = format!("round {round} by {me}").into_bytes();
                let mut w = write(&sealed, 10 + round as u64);
                w.kind = CredentialKind::OAuth;
                let ok = store
                    .replace_credential_if_version(k.clone(), read.info.version, w)
                    .await
                    .unwrap();
                won.push((read.info.version, ok));
            }
            won
        })
    };
    let (ta, tb) = (racer(a.clone(), 'a'), racer(b.clone(), 'b'));
    let (wa, wb) = (ta.await.unwrap(), tb.await.unwrap());
    let mut wins = 0u64;
    for round in 0..ROUNDS {
        let ((va, oka), (vb, okb)) = (wa[round], wb[round]);
        assert_eq!(va, vb, "round {round}: both read the same version");
        assert_eq!(
            va,
            1 + round as u64,
            "round {round}: the version moved by one"
        );
        assert!(oka ^ okb, "round {round}: exactly one wins ({oka}, {okb})");
        wins += 1;
    }
    let last = a.credential(k.clone()).await.unwrap().unwrap();
    assert_eq!(wins, ROUNDS as u64);
    assert_eq!(
        last.info.version,
        1 + wins,
        "one version per win and the first put"
    );
    let winner = if wa[ROUNDS - 1].1 { 'a' } else { 'b' };
    assert_eq!(
        last.sealed.0,
        format!("round {} by {winner}", ROUNDS - 1).into_bytes(),
        "the record holds the last winner's write"
    );
    assert_eq!(last.info.kind, CredentialKind::OAuth);
    // A stale version loses and changes nothing.
    assert_eq!(
        b.replace_credential_if_version(k.clone(), 1, write(b"stale", 999))
            .await,
        Ok(false)
    );
    assert_eq!(a.credential(k.clone()).await.unwrap().unwrap(), last);
    // A record that is gone loses too.
    assert_eq!(
        b.replace_credential_if_version(key("nobody", "linear", "oauth"), 1, write(b"x", 1))
            .await,
        Ok(false)
    );
}

/// Contract test: a record sealed under a key the keyring lacks fails naming the key id; a record
/// copied to another principal does not open; rotation re-seals every record under the current
/// key, after which the old key can be removed.
pub async fn sealed_credentials_open_only_in_place_and_rotation_retires_the_old_key<H: Harness>(
    h: &H,
) {
    let location = h.fresh("cred-seal");
    let store = h.open(&location).await.unwrap();
    let (_, lines) = keyring(&["k1", "k2"]);
    let (k1, k2) = (&lines[0], &lines[1]);
    let old = ring_of(&[k1]);
    let alice = key("alice", "github", "token");
    let bob = key("bob", "linear", "token");
    assert_eq!(seal_and_put(&store, &old, &alice, "alice-secret").await, 1);
    assert_eq!(seal_and_put(&store, &old, &bob, "bob-secret").await, 1);
    assert_eq!(
        open_of(&store, &old, &alice).await.unwrap(),
        Secret::from("alice-secret".to_owned())
    );

    // Without k1: a clear error naming it, never a panic or the plaintext.
    let err = open_of(&store, &ring_of(&[k2]), &alice).await.unwrap_err();
    assert_eq!(
        err,
        VaultError::UnknownKey {
            id: "k1".into(),
            key: alice.clone()
        }
    );
    assert!(!err.to_string().contains("alice-secret"));

    // alice's row copied to mallory, around the store: it does not open there.
    h.raw_execute(
        &location,
        "INSERT INTO credentials (principal, upstream, name, kind, sealed, created_at_ns,
                                  updated_at_ns, version)
         SELECT 'mallory', upstream, name, kind, sealed, created_at_ns, updated_at_ns, version
         FROM credentials WHERE principal = 'alice'",
    )
    .await
    .unwrap();
    let mallory = key("mallory", "github", "token");
    assert_eq!(
        open_of(&store, &old, &mallory).await,
        Err(VaultError::Unopenable {
            id: "k1".into(),
            key: mallory.clone()
        })
    );
    assert_eq!(store.delete_credential(mallory).await, Ok(true));

    // Rotation: k2 first, k1 kept below; every record re-sealed under k2, once.
    let both = ring_of(&[k2, k1]);
    assert_eq!(
        rotate(&store, &both, at(50)).await,
        Ok(Rotation {
            resealed: 2,
            current: 0,
            raced: 0
        })
    );
    for (k, secret) in [(&alice, "alice-secret"), (&bob, "bob-secret")] {
        let record = store.credential(k.clone()).await.unwrap().unwrap();
        assert_eq!(sealed_key_id(&record.sealed), Some("k2"));
        assert_eq!(record.info.version, 2);
        assert_eq!(record.info.updated_at, at(50));
        // k1 removed from the file: everything still opens.
        assert_eq!(
            open_of(&store, &ring_of(&[k2]), k).await.unwrap(),
            Secret::from(secret.to_owned())
        );
        assert!(matches!(
            open_of(&store, &old, k).await,
            Err(VaultError::UnknownKey { .. })
        ));
    }
    // Rotating again finds nothing to do.
    assert_eq!(
        rotate(&store, &ring_of(&[k2]), at(60)).await,
        Ok(Rotation {
            resealed: 0,
            current: 2,
            raced: 0
        })
    );
    // A record sealed under a key no longer listed stops the rotation with the key's id.
    let k3 = Keyring::new_key_line("k3").unwrap().to_string();
    seal_and_put(
        &store,
        &ring_of(&[&k3]),
        &key("carol", "github", "token"),
        "c",
    )
    .await;
    let err = rotate(&store, &ring_of(&[k2]), at(70)).await.unwrap_err();
    assert!(err.to_string().contains("`k3`"), "{err}");
}

/// Contract test: everything the database keeps at rest (the SQLite file and its WAL, a dump of
/// the PostgreSQL schema) holds neither a stored secret nor its base64 or hex.
pub async fn credentials_at_rest_hold_no_secret_bytes<H: Harness>(h: &H) {
    let location = h.fresh("cred-rest");
    let store = h.open(&location).await.unwrap();
    let (ring, _) = keyring(&["k1"]);
    let mut raw = [0u8; 40];
    getrandom::fill(&mut raw).unwrap();
    let secret: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let k = key("alice", "github", "token");
    seal_and_put(&store, &ring, &k, &secret).await;
    // Replaced once, so an older page of the same record may be on disk too.
    seal_and_put(&store, &ring, &k, &secret).await;
    assert_eq!(
        open_of(&store, &ring, &k).await.unwrap(),
        Secret::from(secret.clone())
    );
    // The control: bytes stored unsealed (as a careless caller would) are found by the search.
    let mut canary = [0u8; 40];
    getrandom::fill(&mut canary).unwrap();
    store
        .put_credential(key("bob", "github", "token"), write(&canary, 2))
        .await
        .unwrap();
    let dump = h.at_rest(&location).await;
    let holds = |needle: &[u8]| dump.windows(needle.len()).any(|w| w == needle);
    assert!(
        holds(b"alice") && secret_spellings(&canary).iter().any(|n| holds(n)),
        "the dump holds the records and the unsealed control ({} bytes)",
        dump.len()
    );
    for needle in secret_spellings(secret.as_bytes()) {
        assert!(
            !holds(&needle),
            "the store at rest holds the secret as {:?}",
            String::from_utf8_lossy(&needle)
        );
    }
}

/// Contract test: four instances opening one new store at the same moment (a fleet starting)
/// migrate it once: every open succeeds, the schema is at this build's version, and what one
/// writes to the credentials every other reads.
pub async fn instances_opening_a_new_store_at_once_migrate_it_once<H: Harness>(h: &H) {
    let location = h.fresh("cred-migrate");
    let barrier = std::sync::Barrier::new(4);
    let versions: Vec<Result<u64, StoreError>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|n| {
                let (location, barrier) = (&location, &barrier);
                scope.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    rt.block_on(async move {
                        barrier.wait();
                        let store = h.open(location).await?;
                        let k = key(&format!("p{n}"), "github", "token");
                        store.put_credential(k, write(&[n], 1)).await
                    })
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(versions, vec![Ok(1); 4]);
    assert_eq!(h.schema_version(&location).await, h.known_version());
    let store = h.open(&location).await.unwrap();
    let all = store
        .credentials(CredentialFilter::default())
        .await
        .unwrap();
    let names: Vec<String> = all.iter().map(|i| i.key.to_string()).collect();
    assert_eq!(
        names,
        [
            "p0/github/token",
            "p1/github/token",
            "p2/github/token",
            "p3/github/token"
        ]
    );
}

/// The ways a secret could be written down: itself, its standard base64 (at each of the three
/// alignments, so it is found inside a longer encoding too), and its lowercase hex.
pub fn secret_spellings(secret: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![secret.to_vec()];
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for skip in 0..3 {
        // Encode the secret after `skip` filler bytes and keep only the characters that depend
        // on the secret alone.
        let mut data = vec![0u8; skip];
        data.extend_from_slice(secret);
        let mut text = Vec::new();
        for chunk in data.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                text.push(B64[(n >> (18 - 6 * i) & 63) as usize]);
            }
        }
        let start = (skip * 8).div_ceil(6);
        let core = &text[start..text.len().saturating_sub(2)];
        out.push(core[..core.len().min(32)].to_vec());
    }
    out.push(
        secret
            .iter()
            .flat_map(|b| format!("{b:02x}").into_bytes())
            .collect(),
    );
    out
}
