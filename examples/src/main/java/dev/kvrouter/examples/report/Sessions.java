package dev.kvrouter.examples.report;

import dev.kvrouter.examples.workload.SessionChain;

/**
 * Closed-loop conversations in one run, as report.json gives them per policy (the run notes say the same in a line,
 * {@link SessionChain#summary}): a later turn is sent at its planned time or once the previous turn of its session
 * completed or failed, whichever is later, and resends what the client received of the earlier answers.
 *
 * @param modelAnswers later turns resend the model's own answers (the workload scripts them, and the workers
 *     generate the script from each request's {@code seed}); false: fresh answers
 * @param dependentTurns turns that wait for a previous turn
 * @param heldBack those whose planned time came while the previous turn was still running
 * @param heldBackSeconds their total hold past the planned time
 * @param meanHeldBackSeconds {@code heldBackSeconds / heldBack}, 0 when no turn was held
 * @param maxHeldBackSeconds the longest hold
 * @param answersResentShort scripted answers the client received short of the script (cut by a timeout or an error
 *     mid-stream, or not at all) and resent as received
 * @param answersResentEmpty of those, the ones received not at all (the turn failed, overflowed or was never sent):
 *     the next turn resends the conversation without that answer
 * @param streamedAnswers the scripted answers that streamed content, checked against the script; null when the
 *     run scripts no answer or does not check them (the virtual run's engines generate the script by construction)
 */
public record Sessions(boolean modelAnswers, long dependentTurns, long heldBack, double heldBackSeconds,
    double meanHeldBackSeconds, double maxHeldBackSeconds, long answersResentShort, long answersResentEmpty,
    StreamedAnswers streamedAnswers) {

  /**
   * Streamed answers of turns that script theirs: did the worker generate the script?
   *
   * @param asScripted exactly the scripted token ids
   * @param offScript other token ids (the worker picked its own: the resent answers are fresh in effect)
   * @param notTokenIds content that is not {@code token_id:<id>} (workers not started with
   *     {@code --output-tokens workload})
   */
  public record StreamedAnswers(long asScripted, long offScript, long notTokenIds) {

    public long total() {
      return asScripted + offScript + notTokenIds;
    }
  }

  public Sessions {
    if (heldBack < 0 || heldBack > dependentTurns || answersResentEmpty < 0
        || answersResentEmpty > answersResentShort) {
      throw new IllegalArgumentException("inconsistent session counts: " + heldBack + " held of " + dependentTurns
          + ", " + answersResentEmpty + " empty of " + answersResentShort + " short");
    }
  }

  /**
   * The figures of {@code chain}'s holds (read on the thread that recorded them) with the answers' counts.
   *
   * @param streamedAnswers null when no turn scripts its answer
   */
  public static Sessions of(SessionChain chain, boolean modelAnswers, long answersResentShort,
      long answersResentEmpty, StreamedAnswers streamedAnswers) {
    long held = chain.heldBackTurns();
    double total = seconds(chain.heldBackNanos());
    return new Sessions(modelAnswers, chain.dependentTurns(), held, total,
        held == 0 ? 0 : seconds(chain.heldBackNanos() / held), seconds(chain.maxHeldBackNanos()),
        answersResentShort, answersResentEmpty, streamedAnswers);
  }

  /** The run notes' closed-loop line, the same for both drivers. */
  public String summary() {
    return SessionChain.summary(heldBack, dependentTurns, heldBackSeconds, maxHeldBackSeconds) + "; "
        + (modelAnswers ? "model" : "fresh") + " answers"
        + (answersResentShort == 0 ? "" : ", " + answersResentShort + " resent short");
  }

  /** Nanoseconds as seconds, to the microsecond. */
  private static double seconds(long nanos) {
    return Math.round(nanos / 1e3) / 1e6;
  }
}
