/** The real cluster: (being written). */
export function cliTests(): void {}
