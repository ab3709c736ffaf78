"""The frontier copy loses its foreign-key constraint to the cell.

A flush inserts copies while commits go on. The copy is derived data that the flush keeps
consistent itself (it drops any copy whose cell is gone; the ORM still cascades a cell's
deletion), and a constraint's check takes a KEY SHARE lock on each copied cell, which a
commit's ``SELECT ... FOR UPDATE`` of that cell must wait for: at the insert for an immediate
constraint, at the flush's commit for Django's deferred one. The constraint is dropped by
looking its name up (Django generated it), the state altered to match.
"""

import django.db.models.deletion
from django.db import migrations, models

_DROP = """
DO $$
DECLARE name text;
BEGIN
    FOR name IN SELECT conname FROM pg_constraint
                 WHERE conrelid = 'memory_frontiervector'::regclass AND contype = 'f'
                   AND conkey = ARRAY[(SELECT attnum FROM pg_attribute
                                        WHERE attrelid = 'memory_frontiervector'::regclass
                                          AND attname = 'cell_id')]
    LOOP
        EXECUTE format('ALTER TABLE memory_frontiervector DROP CONSTRAINT %I', name);
    END LOOP;
END $$;
"""

_RESTORE = """
DELETE FROM memory_frontiervector f WHERE NOT EXISTS (SELECT 1 FROM memory_cell c WHERE c.id = f.cell_id);
ALTER TABLE memory_frontiervector ADD CONSTRAINT memory_frontiervector_cell_id_fk
    FOREIGN KEY (cell_id) REFERENCES memory_cell (id) DEFERRABLE INITIALLY DEFERRED;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0003_frontier_index'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='frontiervector',
                    name='cell',
                    field=models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='frontier_vector', serialize=False, to='memory.cell'),
                ),
            ],
            database_operations=[migrations.RunSQL(_DROP, _RESTORE)],
        ),
    ]
