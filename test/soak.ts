/**
 * The load suites' size. By default each runs as many tasks, cycles and nodes as its
 * assertions need, so that `npm test` stays fast; with MEDIAGATE_TEST_SOAK=1 they run their
 * long versions (more tasks, more crash cycles), for a soak run before a release or after a
 * change to the engine, the stores or the ledger (docs/testing.md).
 */
export const soak = process.env["MEDIAGATE_TEST_SOAK"] === "1"

/** `quick` in a normal run, `long` in a soak run. */
export const sized = (quick: number, long: number): number => (soak ? long : quick)
