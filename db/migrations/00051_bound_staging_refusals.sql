-- +goose Up
-- Bounds the refusals already stored as jobs/imports stores new ones
-- (boundRefusal): at most 20 field errors, the others counted in
-- extra.errors_omitted; each code cut to 100 characters, each attr to 200
-- and each detail to 500, the last kept character an ellipsis. A refusal
-- row once kept the whole answer: one 8.9 MB body made a 17.9 MB row, and
-- the migration page read such rows whole. The track trigger moves the
-- counters of the errors left out, as for any change of a row's error.
-- TestBoundRefusal_TheMigrationBoundsAsGoDoes runs this statement beside
-- boundRefusal and holds the two together.
-- +goose StatementBegin
WITH bounded AS (
    SELECT r.id,
        jsonb_build_object(
            'code', CASE WHEN length(r.error->>'code') <= 100 THEN r.error->>'code' ELSE left(r.error->>'code', 99) || '…' END,
            'detail', CASE WHEN length(r.error->>'detail') <= 500 THEN r.error->>'detail' ELSE left(r.error->>'detail', 499) || '…' END,
            'errors', COALESCE((
                SELECT jsonb_agg(jsonb_build_object(
                    'code', CASE WHEN length(e->>'code') <= 100 THEN e->>'code' ELSE left(e->>'code', 99) || '…' END,
                    'attr', CASE WHEN length(e->>'attr') <= 200 THEN e->>'attr' ELSE left(e->>'attr', 199) || '…' END,
                    'detail', CASE WHEN length(e->>'detail') <= 500 THEN e->>'detail' ELSE left(e->>'detail', 499) || '…' END
                ) ORDER BY i)
                FROM jsonb_array_elements(r.error->'errors') WITH ORDINALITY AS x (e, i)
                WHERE i <= 20), '[]'::jsonb)
        ) || CASE WHEN jsonb_array_length(r.error->'errors') > 20
            THEN jsonb_build_object('extra', jsonb_build_object('errors_omitted', jsonb_array_length(r.error->'errors') - 20))
            ELSE '{}'::jsonb END AS error
    FROM staging_refusals r
)
UPDATE staging_refusals r SET error = b.error
FROM bounded b
WHERE b.id = r.id AND r.error IS DISTINCT FROM b.error;
-- +goose StatementEnd

-- +goose Down
-- What was cut is gone; nothing to undo.
SELECT 1;
