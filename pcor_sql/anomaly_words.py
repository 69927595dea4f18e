"""The words of an anomaly answer, shared by the owner's `results.AnomalyResult` and an
analyst's `results.AnalystAnswer`: both are said from the released bit and its parameters
alone (DESIGN.md §3), so the two can never word the same answer differently."""

from __future__ import annotations

from pcor_sql.readable import anomaly_privacy_sentence, anomaly_sentence


class AnomalyWords:
    """`summary` and `privacy_summary` of an anomaly answer: a mixin over the fields below,
    which each result declares as its own dataclass fields."""

    # What `summary` reads: the released bit and the (β, r) it answers.
    anomaly: bool
    beta: float
    radius: float
    # What `privacy_summary` reads: the privacy parameters.
    epsilon: float
    privacy: str
    k: int | None

    @property
    def summary(self) -> str:
        """The answer in plain words: `anomaly: at most β = 5 records (itself included) lie
        within r = 1 of it (a randomized answer)`."""
        return anomaly_sentence(self.anomaly, self.beta, self.radius)

    @property
    def privacy_summary(self) -> str:
        return anomaly_privacy_sentence(self.epsilon, self.privacy, self.k)
