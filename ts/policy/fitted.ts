// Long-lived lists at their length: V8 grows an array built by push, spread or flatMap by half
// again plus 16 slots, room the tens of thousands of lists the compiler keeps at thousands of
// policies would hold empty (megabytes); slice copies exactly what is there.
export const fitted = <T>(items: T[]): T[] => items.slice();
