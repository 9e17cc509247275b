/**
 * What a suite whose PostgreSQL cases do not run logs before its name (`pgSkipReason` of
 * TestDatabases.ts). A module of its own, with no imports, because the run's configuration and its
 * summary reporter (scripts/run-summary/reporter.ts) read it in vitest's main process, where
 * loading TestDatabases.ts would load effect and pg at every start of vitest.
 */
export const pgSkipMarker = "[PostgreSQL cases not run] "
