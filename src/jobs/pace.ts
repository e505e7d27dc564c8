/** Spaces calls `1 / perSecond` seconds apart (0 = no limit): a provider's send rate in one process. */
export class Pace {
  private next = 0;

  constructor(private readonly perSecond: number) {}

  /** True when the next take() would have to wait. */
  wouldWait(): boolean {
    return this.perSecond > 0 && this.next > performance.now();
  }

  async take(): Promise<void> {
    if (this.perSecond <= 0) return;
    const now = performance.now();
    const wait = this.next - now;
    this.next = Math.max(now, this.next) + 1000 / this.perSecond;
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
}
