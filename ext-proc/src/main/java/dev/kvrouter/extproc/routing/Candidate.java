package dev.kvrouter.extproc.routing;

import dev.kvrouter.extproc.load.WorkerLoad;
import dev.kvrouter.index.WorkerId;
import dev.kvrouter.xds.registry.Worker;
import java.util.List;

/**
 * One cache owner (worker, data-parallel rank) considered for one request: its inputs (overlap, load), whether
 * it may take the request and why not, and the cost-model terms. Filled in by the {@link Router} on the
 * request thread, then read-only (policies, decision records).
 */
public final class Candidate {

  private final Worker worker;
  private final WorkerId id;
  Overlap overlap = Overlap.NONE;
  WorkerLoad load = WorkerLoad.ZERO;
  int activeSharedBlocks;
  /** When the fleet's routers last gave it a request ({@code LoadLedger#lastTurn}); 0 never, or no ledger. */
  long lastTurn;
  /** For a stale view, the share of its credit confirmed lately ({@link StaleViewTrust}); unused when fresh. */
  double viewTrust;
  String whyNot;
  boolean scored;
  double creditBlocks;
  double prefillBlocks;
  double decodeBlocks;
  double readBlocks;
  double readSteps = 1;
  double cost;
  double loadCost;

  public Candidate(Worker worker, WorkerId id) {
    this.worker = worker;
    this.id = id;
  }

  /** For tests and benchmarks: a candidate with given inputs. */
  public static Candidate of(Worker worker, int dpRank, Overlap overlap, WorkerLoad load, int activeSharedBlocks) {
    Candidate c = new Candidate(worker, new WorkerId(worker.name(), dpRank));
    c.overlap = overlap;
    c.load = load;
    c.activeSharedBlocks = activeSharedBlocks;
    return c;
  }

  public Worker worker() {
    return worker;
  }

  public WorkerId id() {
    return id;
  }

  /** The worker's weight as routing counts it: at least 1 (a weight-2 worker is taken for twice as fast). */
  public int weight() {
    return Math.max(1, worker.weight());
  }

  /** The requests in flight on {@code cs}, summed. */
  static long totalRequests(List<Candidate> cs) {
    long total = 0;
    for (int i = 0; i < cs.size(); i++) {
      total += cs.get(i).load.requests();
    }
    return total;
  }

  /** The {@link #weight()}s of {@code cs}, summed: the units a fleet's in-flight requests are shared by. */
  static long totalWeight(List<Candidate> cs) {
    long total = 0;
    for (int i = 0; i < cs.size(); i++) {
      total += cs.get(i).weight();
    }
    return total;
  }

  public Overlap overlap() {
    return overlap;
  }

  public WorkerLoad load() {
    return load;
  }

  /** Leading prompt blocks already held by the router's in-flight requests on this worker. */
  public int activeSharedBlocks() {
    return activeSharedBlocks;
  }

  /**
   * For a worker whose view is stale, the share of the view's credit the cost model gives it ({@link
   * StaleViewTrust#trust}: half when the view has just gone stale, then the share the worker's usage reports
   * confirmed); 0 for a fresh view, which is credited in full.
   */
  public double viewTrust() {
    return overlap.stale() ? viewTrust : 0;
  }

  public boolean eligible() {
    return whyNot == null;
  }

  /** Null when eligible; otherwise {@code draining}, {@code role}, {@code unhealthy_*}, {@code busy_*}. */
  public String whyNot() {
    return whyNot;
  }

  /**
   * The turn of the last request any router replica gave this worker (a Lamport clock shared through the
   * replicas' reservations; 0: none yet): the least recently given worker wins a tie.
   */
  public long lastTurn() {
    return lastTurn;
  }

  /** Whether the cost terms below were computed (only for candidates that reached scoring). */
  public boolean scored() {
    return scored;
  }

  /** Blocks of prefill the cache saves here, tier-weighted. */
  public double creditBlocks() {
    return creditBlocks;
  }

  /** Prefill blocks this worker would have queued with the request: active prefill + prompt - credit. */
  public double prefillBlocks() {
    return prefillBlocks;
  }

  /** KV blocks this worker would hold with the request: active blocks + the blocks it adds. */
  public double decodeBlocks() {
    return decodeBlocks;
  }

  /**
   * Context blocks this worker's decode steps would read with the request: its in-flight requests' contexts summed
   * per request, plus the request's own prompt and output blocks.
   */
  public double readBlocks() {
    return readBlocks;
  }

  /**
   * Engine steps the request's first token would wait for here, by which the read term is counted (1 unless
   * {@code step_tokens} is set and more prefill than one step is ahead of it and in it).
   */
  public double readSteps() {
    return readSteps;
  }

  /** The cost model's value; the lowest wins. */
  public double cost() {
    return cost;
  }

  /** The worker's current load in the cost model's units, without this request (tie-breaks, least_load). */
  public double loadCost() {
    return loadCost;
  }

  @Override
  public String toString() {
    return id + (whyNot != null ? " (" + whyNot + ")" : "") + String.format(
        " overlap=%d/%d/%d p%d prefill=%.2f decode=%.2f read=%.2f cost=%.3f", overlap.gpu(), overlap.cpu(),
        overlap.disk(), overlap.predicted(), prefillBlocks, decodeBlocks, readBlocks, cost);
  }
}
