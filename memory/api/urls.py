from __future__ import annotations

from django.urls import path

from . import batch_views, cell_views, change_views, namespace_views, transfer_views, views

# Any name up to the next slash: a name that breaks the rule is refused with it (400), not
# left to the URL resolver's bare 404.
NS = "namespaces/<str:ns>/"

urlpatterns = [
    path("whoami/", views.WhoAmIView.as_view(), name="api-whoami"),
    path("namespaces/", namespace_views.NamespacesView.as_view(), name="api-namespaces"),
    path(NS, namespace_views.NamespaceDetailView.as_view(), name="api-namespace"),
    path(f"{NS}observations/", views.ObservationsView.as_view(), name="api-observations"),
    path(f"{NS}observations/batch/", batch_views.ObservationBatchView.as_view(),
         name="api-observation-batch"),
    path(f"{NS}observations/<int:pk>/", views.ObservationDetailView.as_view(),
         name="api-observation"),
    path(f"{NS}observations/<int:pk>/retry/", views.ObservationRetryView.as_view(),
         name="api-observation-retry"),
    path(f"{NS}cells/", cell_views.CellsView.as_view(), name="api-cells"),
    path(f"{NS}cells/<str:key>/", cell_views.CellDetailView.as_view(), name="api-cell"),
    path(f"{NS}cells/<str:key>/graph/", cell_views.CellGraphView.as_view(), name="api-cell-graph"),
    path(f"{NS}cells/<str:key>/history/", cell_views.CellHistoryView.as_view(),
         name="api-cell-history"),
    path(f"{NS}cells/<str:key>/timeline/", cell_views.CellTimelineView.as_view(),
         name="api-cell-timeline"),
    path(f"{NS}cells/<str:key>/operations/", cell_views.CellOperationsView.as_view(),
         name="api-cell-operations"),
    path(f"{NS}operations/", views.OperationsView.as_view(), name="api-operations"),
    path(f"{NS}changes/", change_views.ChangesView.as_view(), name="api-changes"),
    path(f"{NS}read/", views.ReadView.as_view(), name="api-read"),
    path(f"{NS}export/", transfer_views.NamespaceExportView.as_view(), name="api-export"),
    path(f"{NS}answer/", views.AnswerView.as_view(), name="api-answer"),
]
