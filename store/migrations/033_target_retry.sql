-- A target's own retry policy (core/retry.ts): {maxAttempts?, initialIntervalSeconds?,
-- backoffCoefficient?, maximumIntervalSeconds?, windowSeconds?}; null, the deployment's.
alter table targets add column retry jsonb;
