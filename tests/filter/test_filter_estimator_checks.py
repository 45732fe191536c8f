"""scikit-learn's estimator checks on the Z-filter and multiple-choice AFLite (AFLite's are in
``test_aflite_estimator.py``). Every check either passes or is declared below with its
reason; the declared ones run as strict xfails, so a check that starts passing fails the
suite and must come off the list."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from aflite_core.filter._multiple_choice import MultipleChoiceAFLite
from aflite_core.filter._zfilter import ZFilter

#: The project's rule for a wrong type (TypeError), shared with AFLite.
_TYPE_RULE = {
    "check_complex_data": "a non-real dtype is refused with TypeError, the project's rule for "
                          "a wrong type; the check wants ValueError 'Complex data not supported'",
    "check_dtype_object": "dtype=object features are refused outright (TypeError) rather than "
                          "converted; the check wants numbers held in an object array accepted",
}

Z_EXCLUDED = dict(_TYPE_RULE)

#: The checks fit with class labels 0..k-1 and no groups. Multiple-choice AFLite needs the
#: question of every row (groups=) and y marking each question's one right choice (0/1), so
#: a check whose fit must succeed cannot; what it refuses, it refuses with a ValueError that
#: names y or groups.
_NO_QUESTIONS = (
    "the check fits with class labels and no groups=; multiple-choice AFLite needs the "
    "question of each row and y marking its one right choice (0/1), and refuses anything "
    "else with a ValueError naming y or groups"
)
MC_EXCLUDED = {
    **_TYPE_RULE,
    **{name: _NO_QUESTIONS for name in (
        "check_fit_score_takes_y", "check_estimators_overwrite_params",
        "check_dont_overwrite_parameters", "check_estimators_fit_returns_self",
        "check_readonly_memmap_input", "check_n_features_in_after_fitting",
        "check_positive_only_tag_during_fit", "check_estimators_dtypes",
        "check_pipeline_consistency", "check_estimators_nan_inf", "check_estimators_pickle",
        "check_f_contiguous_array_estimator", "check_methods_sample_order_invariance",
        "check_methods_subset_invariance", "check_fit2d_1sample", "check_fit2d_1feature",
        "check_dict_unchanged", "check_fit_idempotent", "check_fit_check_is_fitted",
        "check_n_features_in", "check_fit2d_predict1d", "check_requires_y_none",
    )},
}


def _excluded(estimator) -> dict[str, str]:
    return MC_EXCLUDED if isinstance(estimator, MultipleChoiceAFLite) else Z_EXCLUDED


@parametrize_with_checks(
    [ZFilter(random_state=0), ZFilter(alpha=0.2, batch_size=2, random_state=0),
     MultipleChoiceAFLite(n_partitions=4, target_size=0.6, train_size=0.7, random_state=0)],
    expected_failed_checks=_excluded, xfail_strict=True)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
