/**
 * Loaded first, before uPlot, which makes a number format of `navigator.language` when it
 * loads: a browser started under `LANG=C` (a server, a CI machine) reports `en-US@posix`,
 * which `Intl` refuses, and the whole script would stop there. Such a language is read as
 * en-US; any language `Intl` takes is left as it is.
 */
try {
  new Intl.NumberFormat(navigator.language)
} catch (e) {
  Object.defineProperty(navigator, "language", { value: "en-US", configurable: true })
}

export {}
