/** The real cluster: (being written). */
export function jobsTests(): void {}
