-- Issue 24: the per-host secret store. One row per (host, name): the current version's value
-- sealed with the keyring (AES-256-GCM; the key id, the nonce and the ciphertext with its tag,
-- bound to host, name and version as associated data). A delete keeps the row as a tombstone
-- without its sealed value, so a later put continues the version count: a version number is
-- never reused, and no old ciphertext can pass for a later version.

CREATE TABLE workflow_secret_t (
    host_id uuid NOT NULL,
    name varchar(63) NOT NULL,
    version bigint NOT NULL,
    key_id text,
    nonce bytea,
    ciphertext bytea,
    created_by varchar(126) NOT NULL,
    updated_by varchar(126) NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    updated_ts timestamptz NOT NULL DEFAULT now(),
    deleted_ts timestamptz,
    CONSTRAINT workflow_secret_pk PRIMARY KEY (host_id, name),
    CONSTRAINT workflow_secret_name_check CHECK (name ~ '^[A-Za-z][A-Za-z0-9_]{0,62}$'),
    CONSTRAINT workflow_secret_version_check CHECK (version >= 1),
    -- A live secret has all three sealed parts; a tombstone has none of them.
    CONSTRAINT workflow_secret_sealed_check CHECK (
        (deleted_ts IS NULL AND key_id IS NOT NULL AND nonce IS NOT NULL
             AND ciphertext IS NOT NULL)
        OR (deleted_ts IS NOT NULL AND key_id IS NULL AND nonce IS NULL AND ciphertext IS NULL)
    ),
    CONSTRAINT workflow_secret_nonce_check CHECK (nonce IS NULL OR octet_length(nonce) = 12),
    -- At most 4096 characters of value plus the 16-byte GCM tag.
    CONSTRAINT workflow_secret_ciphertext_check
        CHECK (ciphertext IS NULL OR octet_length(ciphertext) BETWEEN 17 AND 4112)
);

-- Rows are tombstoned, never deleted, by the service.
REVOKE DELETE, TRUNCATE ON workflow_secret_t FROM workflow_runtime;

-- workflow_secret_list and delete ask which published versions declare a name in use.secrets.
CREATE INDEX wf_definition_version_secrets_idx ON wf_definition_version_t
    USING gin ((document -> 'use' -> 'secrets'))
    WHERE status = 'active';
