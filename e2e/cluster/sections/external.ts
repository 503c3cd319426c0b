/** The real cluster: (being written). */
export function externalTests(): void {}
