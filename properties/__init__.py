"""refimpl's property suite: Hypothesis properties of a backend under test.

Every ``test_<component>*.py`` here takes the ``refimpl_backend`` fixture and judges that
backend against refimpl's answers. The suite ships inside the package, so an installed wheel
runs it: ``refimpl fuzz --target X``, or ``pytest --pyargs refimpl.properties
--refimpl-target X``.
"""
