/** Spaces calls `1 / perSecond` seconds apart (0 = no limit): a provider's send rate in one process. */
export class Pace {
  private next = 0;

  constructor(private readonly perSecond: number) {}

  /** How long the next take() would wait, in ms (0: none). */
  waitMs(): number {
    return this.perSecond > 0 ? Math.max(0, this.next - performance.now()) : 0;
  }

  async take(): Promise<void> {
    if (this.perSecond <= 0) return;
    const now = performance.now();
    const wait = this.next - now;
    this.next = Math.max(now, this.next) + 1000 / this.perSecond;
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
}
