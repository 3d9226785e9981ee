"""Agreement statistics: correlations and errors against human scores, bootstrap CIs, paired comparisons,
Elo, Cohen's and Fleiss' kappa (one of each, ``_kappa``) and the full analysis behind ``knockout report``
(numpy/scipy/scikit-learn, loaded lazily)."""

from typing import TYPE_CHECKING

from knockout._lazy import lazy_exports

_EXPORTS = {
    "pearson": "knockout.metrics._agreement",
    "spearman": "knockout.metrics._agreement",
    "rmse": "knockout.metrics._agreement",
    "question_level": "knockout.metrics._agreement",
    "bootstrap": "knockout.metrics._bootstrap",
    "paired_bootstrap": "knockout.metrics._bootstrap",
    "kendall": "knockout.metrics._measures",
    "cohen_kappa": "knockout.metrics._kappa",
    "fleiss_kappa": "knockout.metrics._kappa",
    "grid_kappa": "knockout.metrics._kappa",
    "rater_agreement": "knockout.metrics._kappa",
    "pairwise_ranking_accuracy": "knockout.metrics._measures",
    "williams_test": "knockout.metrics._measures",
    "elo_shuffled": "knockout.metrics._elo",
    "win_rates": "knockout.metrics._elo",
    "analyse": "knockout.metrics._analysis",
    "Analysis": "knockout.metrics._analysis",
    "paired_comparison": "knockout.metrics._comparison",
}
__all__ = [
    "Analysis",
    "analyse",
    "bootstrap",
    "cohen_kappa",
    "elo_shuffled",
    "fleiss_kappa",
    "grid_kappa",
    "kendall",
    "paired_bootstrap",
    "paired_comparison",
    "pairwise_ranking_accuracy",
    "pearson",
    "question_level",
    "rater_agreement",
    "rmse",
    "spearman",
    "williams_test",
    "win_rates",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from knockout.metrics._agreement import pearson, question_level, rmse, spearman
    from knockout.metrics._analysis import Analysis, analyse
    from knockout.metrics._bootstrap import bootstrap, paired_bootstrap
    from knockout.metrics._comparison import paired_comparison
    from knockout.metrics._elo import elo_shuffled, win_rates
    from knockout.metrics._kappa import cohen_kappa, fleiss_kappa, grid_kappa, rater_agreement
    from knockout.metrics._measures import kendall, pairwise_ranking_accuracy, williams_test
