import { describe, expect, it } from "@effect/vitest"
import * as Core from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"

describe("the public index", () => {
  it("does not export the test fixtures; they live at @mediagate/core/testing", () => {
    expect(Object.keys(Core)).not.toContain("Testing")
    expect(Object.values(Core)).not.toContain(Testing)
    expect(Testing.record({ id: "t1" }).ownerId).toBe(Testing.owner)
  })
})
